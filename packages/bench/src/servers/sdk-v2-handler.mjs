// SDK v2's entry for 2026-07-28 clients, as its docs wire it: `createMcpHandler(factory)` (a new
// McpServer per request) served through `toNodeHandler` from @modelcontextprotocol/node, on bare
// node:http, or with BENCH_FRAMEWORK=express on the v2 Express app (createMcpExpressApp, then
// the parsed body handed on), as the SDK's conformance server mounts it. Defaults otherwise.
import { createServer } from 'node:http';
import { createMcpExpressApp } from '@modelcontextprotocol/express';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { createMcpHandler } from '@modelcontextprotocol/server';
import { exitOnSigterm, handleControl } from './control.mjs';
import { benchEnv } from './tools.mjs';
import { createBenchServerV2 } from './tools-v2.mjs';

const env = benchEnv();
const handler = createMcpHandler(() => createBenchServerV2('bench-sdk-v2-handler'));
const serve = toNodeHandler(handler);
const noStore = () => {
  throw new Error('createMcpHandler keeps no event store');
};

let server;
if (process.env.BENCH_FRAMEWORK === 'express') {
  const app = createMcpExpressApp();
  app.use((req, res, next) => {
    if (!handleControl(req, res, { fill: noStore })) next();
  });
  app.post('/mcp', (req, res) => serve(req, res, req.body));
  server = app.listen(env.port, env.host, () => console.log(`LISTENING ${server.address().port}`));
} else {
  server = createServer((req, res) => {
    if (handleControl(req, res, { fill: noStore })) return;
    if (req.url === '/mcp') void serve(req, res);
    else res.writeHead(404).end();
  });
  server.listen(env.port, env.host, () => console.log(`LISTENING ${server.address().port}`));
}
exitOnSigterm();
