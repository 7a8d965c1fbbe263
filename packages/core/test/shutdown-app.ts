// The app shutdown.test.ts sends SIGTERM to: an MCP endpoint on node:http with shutdownGracefully,
// its steps on stdout.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createMcpHandler, handleNodeRequest } from '../src/index.js';
import { shutdownGracefully } from '../src/node.js';

const mcp = createMcpHandler({ server: () => new McpServer({ name: 'shutdown-app', version: '1.0.0' }), retryMs: 400 });
const server = createServer((req, res) => void handleNodeRequest(mcp, req, res));
server.listen(0, '127.0.0.1', () => console.log(`listening on ${(server.address() as AddressInfo).port}`));
shutdownGracefully(server, mcp, {
  deadlineMs: 5_000,
  graceMs: 2_000,
  onStep: (s) => console.log(`step ${s.step}${s.step === 'draining' ? ` ${s.reason}` : ''}`),
  onShutdown: () => console.log('bye'),
});
