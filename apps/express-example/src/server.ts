import express from 'express';
import { createMcpHandler, type McpHandlerOptions } from '@mcp-kit/core';
import { mcpExpress } from '@mcp-kit/express';
import { createFixtureServer } from '@mcp-kit/fixtures';
import { createRedisScaleOut } from '@mcp-kit/redis';

const port = Number(process.env.PORT ?? 3000);
const host = process.env.HOST ?? '127.0.0.1';
const redisUrl = process.env.REDIS_URL;
// Names this process in an `x-served-by` header, so a person (or a test) behind a load balancer
// sees which instance answered.
const instanceName = process.env.INSTANCE_NAME;

// With REDIS_URL, several instances share sessions behind any load balancer: events live in Redis
// and requests for another instance's session are forwarded to it at its INTERNAL_URL.
const redis = redisUrl
  ? createRedisScaleOut({
      url: redisUrl,
      internalUrl: process.env.INTERNAL_URL ?? `http://${host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host}:${port}/mcp`,
    })
  : undefined;
const scaleOut: Partial<McpHandlerOptions> = redis ? { eventStore: redis.eventStore, cluster: redis.cluster } : {};

const mcp = createMcpHandler({
  server: () => createFixtureServer({ name: 'mcp-kit-express-example' }),
  retryMs: Number(process.env.RETRY_MS ?? 1000),
  // The conformance suite never DELETEs its sessions; don't keep them around for long.
  sessionIdleTtlMs: Number(process.env.SESSION_TTL_MS ?? 5 * 60_000),
  // HIBERNATE_MS=0 lets idle sessions' servers go at once (see hibernateAfterMs); off by default.
  hibernateAfterMs: process.env.HIBERNATE_MS ? Number(process.env.HIBERNATE_MS) : undefined,
  ...scaleOut,
});

const app = express();
if (instanceName) {
  app.use((_req, res, next) => {
    res.setHeader('x-served-by', instanceName);
    next();
  });
}
app.use('/mcp', mcpExpress(mcp));

if (redis) {
  const waiting = setTimeout(() => console.log(`express-example: waiting for Redis at ${redisUrl}`), 1_000);
  await redis.ready();
  clearTimeout(waiting);
}

const server = app.listen(port, host, () => {
  const mode = redis ? ` (Redis ${redisUrl}, instance ${redis.cluster.instanceId}${instanceName ? ` "${instanceName}"` : ''})` : '';
  console.log(`express-example: MCP at http://${host}:${port}/mcp${mode}`);
});

function shutdown(): void {
  void mcp.close().finally(() => server.close(() => process.exit(0)));
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
