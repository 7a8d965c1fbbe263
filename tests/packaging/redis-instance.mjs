// One instance of a scaled-out app, as packages/redis/README.md shows it, for
// tests/packaging/packed-install.test.ts: run from the scratch install (the packed packages and the
// ioredis it holds), two of them behind a round-robin proxy. Its tool lets go of its client
// (closeSSEStream) between two log messages, so the client's resume may land on the other instance,
// which replays and follows the call from Redis. Env: PORT, INSTANCE_NAME, REDIS_URL. Prints one
// JSON line once it listens: its name and the ioredis it runs on; stops on SIGTERM.
import { once } from 'node:events';
import { createRequire } from 'node:module';
import { setTimeout as sleep } from 'node:timers/promises';
import { closeSSEStream, createMcpHandler } from '@mcp-kit/core';
import { mcpExpress } from '@mcp-kit/express';
import { createRedisScaleOut } from '@mcp-kit/redis';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import express from 'express';
import { z } from 'zod';

const name = process.env.INSTANCE_NAME;
const port = Number(process.env.PORT);

function buildServer() {
  const server = new McpServer({ name: 'reports', version: '1.0.0' }, { capabilities: { logging: {} } });
  server.registerTool('report', { inputSchema: { month: z.string() } }, async ({ month }, extra) => {
    const log = (data) => server.server.sendLoggingMessage({ level: 'info', data }, extra.sessionId);
    await log(`started on ${name}`);
    closeSSEStream(extra, 20);
    // Long enough for the client to come back (20 ms) before the rest is written.
    await sleep(300, undefined, { signal: extra.signal });
    await log(`still on ${name}`);
    return { content: [{ type: 'text', text: `report for ${month}, from ${name}` }] };
  });
  return server;
}

const redis = createRedisScaleOut({
  url: process.env.REDIS_URL,
  mode: 'forward',
  internalUrl: `http://127.0.0.1:${port}/mcp`,
  instanceId: name,
});
const mcp = createMcpHandler({
  server: () => buildServer(),
  eventStore: redis.eventStore,
  cluster: redis.cluster,
  taskStore: redis.taskStore,
  retryMs: 20,
});
await redis.ready(10_000);
const app = express();
app.use((_req, res, next) => {
  res.setHeader('x-served-by', name);
  next();
});
app.use('/mcp', mcpExpress(mcp));
const server = app.listen(port, '127.0.0.1');
await once(server, 'listening');
const ioredis = createRequire(import.meta.url)('ioredis/package.json').version;
console.log(JSON.stringify({ listening: name, ioredis }));
process.once('SIGTERM', async () => {
  server.closeAllConnections();
  server.close();
  await mcp.close();
  process.exit(0);
});
