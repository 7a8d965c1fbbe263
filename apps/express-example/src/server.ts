import express from 'express';
import { createMcpHandler, type McpHandlerOptions } from '@mcp-kit/core';
import { mcpExpress } from '@mcp-kit/express';
import { fixtureServer, parseFixtureSdk, type FixtureSdk } from '@mcp-kit/fixtures';
import { createRedisScaleOut } from '@mcp-kit/redis';
import { mountLivePage } from './live/mount.js';

const port = Number(process.env.PORT ?? 3000);
const host = process.env.HOST ?? '127.0.0.1';
const redisUrl = process.env.REDIS_URL;
// Names this process in an `x-served-by` header, so a person (or a test) behind a load balancer
// sees which instance answered.
const instanceName = process.env.INSTANCE_NAME;
const sdk = sdkFromEnv();

// With REDIS_URL, several instances share sessions and tasks behind any load balancer: events,
// session records and tasks live in Redis, requests for another instance's session are forwarded
// to it at its INTERNAL_URL, and a session whose instance is gone is restored where it lands.
// HEARTBEAT_MS: an instance counts as gone 3 beats after its last one (default 2 s).
const redis = redisUrl
  ? createRedisScaleOut({
      url: redisUrl,
      internalUrl: process.env.INTERNAL_URL ?? `http://${host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host}:${port}/mcp`,
      heartbeatMs: process.env.HEARTBEAT_MS ? Number(process.env.HEARTBEAT_MS) : undefined,
    })
  : undefined;
const scaleOut: Partial<McpHandlerOptions> = redis
  ? { eventStore: redis.eventStore, cluster: redis.cluster, taskStore: redis.taskStore }
  : {};

const mcp = createMcpHandler({
  server: ({ sessionId, restoring }) => {
    const server = fixtureServer(sdk, {
      name: 'mcp-kit-express-example',
      // Instances behind one load balancer must share it: a client's next round may reach any of them.
      requestStateKey: process.env.REQUEST_STATE_KEY,
    });
    // In a cluster, say which instance took a session over and whom it restored it for.
    if (redis && restoring) server.server.oninitialized = () => logRestored(sessionId, server);
    return server;
  },
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
// /mcp-kit/live: sessions, streams and polls as they happen (LIVE_PAGE=0 leaves it out; it turns
// the engine's event reporting on).
if (process.env.LIVE_PAGE !== '0') mountLivePage(app, mcp);
app.use('/mcp', mcpExpress(mcp));

if (redis) {
  const waiting = setTimeout(() => console.log(`express-example: waiting for Redis at ${redisUrl}`), 1_000);
  await redis.ready();
  clearTimeout(waiting);
}

const server = app.listen(port, host, () => {
  const mode = redis ? ` (Redis ${redisUrl}, instance ${redis.cluster.instanceId}${instanceName ? ` "${instanceName}"` : ''})` : '';
  console.log(`express-example: MCP at http://${host}:${port}/mcp, fixture on SDK ${sdk}${mode}`);
});

/** MCP_SDK=v1|v2 (default v2) picks the SDK the fixture is built with; anything else stops here. */
function sdkFromEnv(): FixtureSdk {
  try {
    return parseFixtureSdk(process.env.MCP_SDK);
  } catch (error) {
    console.error(`express-example: ${(error as Error).message}`);
    process.exit(1);
  }
}

function logRestored(sessionId: string | undefined, server: ReturnType<typeof fixtureServer>): void {
  const client = server.server.getClientVersion();
  const capabilities = Object.keys(server.server.getClientCapabilities() ?? {}).join(',') || 'none';
  console.log(`express-example: restored session ${sessionId} for ${client?.name}/${client?.version} (capabilities: ${capabilities})`);
}

// SIGTERM (a deploy): hand sessions to the other instances and let running calls finish (at most
// DRAIN_MS, default 10 s); then stop listening and, once the last connection has ended, leave the
// cluster. A second signal stops at once.
let stopping = false;
async function shutdown(signal: NodeJS.Signals): Promise<void> {
  if (stopping) process.exit(1);
  stopping = true;
  const started = Date.now();
  const deadlineMs = Number(process.env.DRAIN_MS ?? 10_000);
  console.log(`express-example: ${signal}: draining (deadline ${deadlineMs} ms)`);
  try {
    await mcp.drain({ deadlineMs });
    console.log(`express-example: drained in ${Date.now() - started} ms`);
  } catch (error) {
    console.error(`express-example: drain failed: ${(error as Error).message}`);
  }
  // What still reaches this instance until the listener is closed is handed over; a connection
  // that somehow outlives that for CLOSE_GRACE_MS (default 5 s) is ended by close().
  let closing: Promise<void> | undefined;
  const close = () => (closing ??= mcp.close());
  const graceMs = Number(process.env.CLOSE_GRACE_MS ?? 5_000);
  const grace = setTimeout(() => {
    console.log(`express-example: connections still open ${graceMs} ms after the drain: closing them`);
    void close();
  }, graceMs);
  await new Promise((resolve) => {
    server.close(resolve);
    server.closeIdleConnections();
  });
  clearTimeout(grace);
  await close();
  process.exit(0);
}
process.on('SIGTERM', (signal) => void shutdown(signal));
process.on('SIGINT', (signal) => void shutdown(signal));
