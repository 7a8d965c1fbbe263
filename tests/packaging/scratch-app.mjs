// The app that tests/packaging/packed-install.test.ts installs from the packed tarballs with npm,
// beside the current releases of what a user brings. It runs from the scratch directory, so every
// import below resolves in that npm install, never in the monorepo. It is README.md's "Use it" code
// (kept here, not read from the README, which changes by itself): an SDK v2 server whose tool lets go
// of its client with closeSSEStream, one handler made by the one @mcp-kit/core and mounted as the
// README mounts it on Express, Koa and Next.js (the route module's exports called with web Requests,
// as `next start` calls them; no build). With a second copy of core under an adapter, that adapter
// would bridge to another copy's engine. The same tool on an SDK v1 server, through Express, too.
// A real SDK v1 client calls the tool through each: the stream closes (SEP-1699) before the tool
// answers, so the answer comes on the client's resume. Prints one JSON line with what each received.
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
import { McpServer as McpServerV1 } from '@modelcontextprotocol/sdk/server/mcp.js';
import { McpServer } from '@modelcontextprotocol/server';
import express from 'express';
import Koa from 'koa';
import { z } from 'zod';

// README: "Use it". The retry is 20 ms instead of 10 s, so the client comes back at once.
function buildServer() {
  const server = new McpServer({ name: 'reports', version: '1.0.0' }, { capabilities: { logging: {} } });
  server.registerTool('report', { inputSchema: z.object({ month: z.string() }) }, async ({ month }, ctx) => {
    closeSSEStream(ctx, 20);
    // The client sees the close and comes back before the answer is written.
    await sleep(100, undefined, { signal: ctx.mcpReq.signal });
    return { content: [{ type: 'text', text: `report for ${month}` }] };
  });
  return server;
}

// "With SDK v1 the tool is the same but for the context."
function buildServerV1() {
  const server = new McpServerV1({ name: 'reports', version: '1.0.0' }, { capabilities: { logging: {} } });
  server.registerTool('report', { inputSchema: { month: z.string() } }, async ({ month }, extra) => {
    closeSSEStream(extra, 20);
    await sleep(100, undefined, { signal: extra.signal });
    return { content: [{ type: 'text', text: `report for ${month}` }] };
  });
  return server;
}

const mcp = createMcpHandler({ server: () => buildServer(), retryMs: 2_000 });
const mcpV1 = createMcpHandler({ server: () => buildServerV1(), retryMs: 2_000 });

async function listen(listener) {
  const server = createServer(listener);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return server;
}

// Express 4 or 5
const app = express();
app.use('/mcp', mcpExpress(mcp));
const expressServer = await listen(app);

const appV1 = express();
appV1.use('/mcp', mcpExpress(mcpV1));
const expressServerV1 = await listen(appV1);

// Koa 2 or 3
const koa = new Koa();
koa.use(mcpKoa(mcp, { path: '/mcp' }));
const koaServer = await listen(koa.callback());

// Next.js App Router: app/mcp/route.ts
const route = { runtime: 'nodejs', dynamic: 'force-dynamic', ...mcpNext(mcp, { localAddress: '127.0.0.1' }) };
const nextFetch = async (input, init) => {
  const request = new Request(input, init);
  const method = route[request.method];
  if (typeof method !== 'function') return new Response(null, { status: 405 });
  return method(request);
};

/** Connects an SDK v1 client to `url` (through `fetch`, when given), calls `report` and says what came back. */
async function callThrough(via, url, fetch) {
  const client = new Client({ name: `packed-install-${via}`, version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url), fetch ? { fetch } : {});
  await client.connect(transport);
  const tools = (await client.listTools()).tools.map((t) => t.name);
  const result = await client.callTool({ name: 'report', arguments: { month: via } });
  await transport.terminateSession();
  await client.close();
  return { via, tools, text: result.content[0].text };
}

const calls = [];
try {
  calls.push(await callThrough('express', `http://127.0.0.1:${expressServer.address().port}/mcp`));
  calls.push(await callThrough('koa', `http://127.0.0.1:${koaServer.address().port}/mcp`));
  calls.push(await callThrough('next', 'http://127.0.0.1:3000/mcp', nextFetch));
  calls.push(await callThrough('express, SDK v1 server', `http://127.0.0.1:${expressServerV1.address().port}/mcp`));
} finally {
  for (const server of [expressServer, expressServerV1, koaServer]) server.close();
  await mcp.close();
  await mcpV1.close();
}

// Where each package finds @mcp-kit/core from its own directory: one file for all of them.
const resolveFrom = (pkg) => createRequire(createRequire(import.meta.url).resolve(`${pkg}/package.json`)).resolve('@mcp-kit/core');
const coreResolvedFrom = Object.fromEntries(
  ['@mcp-kit/express', '@mcp-kit/koa', '@mcp-kit/next', '@mcp-kit/redis'].map((pkg) => [pkg, resolveFrom(pkg)]),
);
coreResolvedFrom.app = createRequire(import.meta.url).resolve('@mcp-kit/core');

console.log(JSON.stringify({ calls, coreResolvedFrom, redisExport: typeof createRedisScaleOut }));
