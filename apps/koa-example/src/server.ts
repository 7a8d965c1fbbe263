import Koa from 'koa';
import { createMcpHandler } from '@mcp-kit/core';
import { createFixtureServer } from '@mcp-kit/fixtures';
import { mcpKoa } from '@mcp-kit/koa';

const port = Number(process.env.PORT ?? 3000);
const host = process.env.HOST ?? '127.0.0.1';

const mcp = createMcpHandler({
  server: () => createFixtureServer({ name: 'mcp-kit-koa-example' }),
  retryMs: Number(process.env.RETRY_MS ?? 1000),
  // The conformance suite never DELETEs its sessions; don't keep them around for long.
  sessionIdleTtlMs: Number(process.env.SESSION_TTL_MS ?? 5 * 60_000),
});

const app = new Koa();
app.use(mcpKoa(mcp, { path: '/mcp' }));

const server = app.listen(port, host, () => {
  console.log(`koa-example: MCP at http://${host}:${port}/mcp`);
});

function shutdown(): void {
  void mcp.close().finally(() => server.close(() => process.exit(0)));
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
