// The app that tests/packaging/packed-install.test.ts installs from the packed tarballs with npm.
// It runs from the scratch directory, so every import below resolves in that npm install, never
// in the monorepo. One handler, made by the one @mcp-kit/core, is served by all three adapters: with
// a second copy of core under an adapter, that adapter would bridge to another copy's engine. Each
// adapter then serves a real SDK v1 client a tools/call whose tool closes its stream
// (closeSSEStream, SEP-1699) before it returns, so the answer comes on the client's resume.
// Prints one JSON line with what each client received.
import { once } from 'node:events';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';
import { closeSSEStream, createMcpHandler } from '@mcp-kit/core';
import { mcpExpress } from '@mcp-kit/express';
import { mcpKoa } from '@mcp-kit/koa';
import { mcpNext } from '@mcp-kit/next';
import { createRedisScaleOut } from '@mcp-kit/redis';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import express from 'express';
import Koa from 'koa';
import { z } from 'zod';

function buildServer() {
  const server = new McpServer({ name: 'packed-install', version: '1.0.0' });
  server.registerTool(
    'report',
    { description: 'Closes its stream, then answers on the resume', inputSchema: { name: z.string() } },
    async ({ name }, extra) => {
      const closed = closeSSEStream(extra, 20);
      // Let the client see the close and come back before the answer is written.
      await sleep(100);
      return { content: [{ type: 'text', text: `hello ${name}; stream closed: ${closed}` }] };
    },
  );
  return server;
}

const handler = createMcpHandler({ server: () => buildServer(), retryMs: 20 });

async function listen(listener) {
  const server = createServer(listener);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return server;
}

/** Connects an SDK client to `url` (through `fetch`, when given), calls `report` and says what came back. */
async function callThrough(adapter, url, fetch) {
  const client = new Client({ name: `packed-install-${adapter}`, version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url), fetch ? { fetch } : {});
  await client.connect(transport);
  const tools = (await client.listTools()).tools.map((t) => t.name);
  const result = await client.callTool({ name: 'report', arguments: { name: adapter } });
  await transport.terminateSession();
  await client.close();
  return { adapter, tools, text: result.content[0].text };
}

const expressApp = express();
expressApp.use('/mcp', mcpExpress(handler));
const expressServer = await listen(expressApp);

const koaApp = new Koa();
koaApp.use(mcpKoa(handler, { path: '/mcp' }));
const koaServer = await listen(koaApp.callback());

// Next: the route module's exports called with a web Request, as `next start` would (no build).
const route = mcpNext(handler, { localAddress: '127.0.0.1' });
const nextFetch = async (input, init) => {
  const request = new Request(input, init);
  const method = route[request.method];
  if (!method) return new Response(null, { status: 405 });
  return method(request);
};

const calls = [];
try {
  calls.push(await callThrough('express', `http://127.0.0.1:${expressServer.address().port}/mcp`));
  calls.push(await callThrough('koa', `http://127.0.0.1:${koaServer.address().port}/mcp`));
  calls.push(await callThrough('next', 'http://127.0.0.1:3000/mcp', nextFetch));
} finally {
  expressServer.close();
  koaServer.close();
  await handler.close();
}

// Where each package finds @mcp-kit/core from its own directory: one file for all of them.
const resolveFrom = (pkg) => createRequire(createRequire(import.meta.url).resolve(`${pkg}/package.json`)).resolve('@mcp-kit/core');
const coreResolvedFrom = Object.fromEntries(
  ['@mcp-kit/express', '@mcp-kit/koa', '@mcp-kit/next', '@mcp-kit/redis'].map((pkg) => [pkg, resolveFrom(pkg)]),
);
coreResolvedFrom.app = createRequire(import.meta.url).resolve('@mcp-kit/core');

console.log(JSON.stringify({ calls, coreResolvedFrom, redisExport: typeof createRedisScaleOut }));
