import Koa from 'koa';
import { createMcpHandler } from '@mcp-kit/core';
import { fixtureServer, parseFixtureSdk, type FixtureSdk } from '@mcp-kit/fixtures';
import { mcpKoa } from '@mcp-kit/koa';

const port = Number(process.env.PORT ?? 3000);
const host = process.env.HOST ?? '127.0.0.1';
const sdk = sdkFromEnv();

const mcp = createMcpHandler({
  server: () => fixtureServer(sdk, { name: 'mcp-kit-koa-example' }),
  retryMs: Number(process.env.RETRY_MS ?? 1000),
  // The conformance suite never DELETEs its sessions; don't keep them around for long.
  sessionIdleTtlMs: Number(process.env.SESSION_TTL_MS ?? 5 * 60_000),
});

const app = new Koa();
app.use(mcpKoa(mcp, { path: '/mcp' }));

const server = app.listen(port, host, () => {
  console.log(`koa-example: MCP at http://${host}:${port}/mcp, fixture on SDK ${sdk}`);
});

/** MCP_SDK=v1|v2 (default v2) picks the SDK the fixture is built with; anything else stops here. */
function sdkFromEnv(): FixtureSdk {
  try {
    return parseFixtureSdk(process.env.MCP_SDK);
  } catch (error) {
    console.error(`koa-example: ${(error as Error).message}`);
    process.exit(1);
  }
}

// SIGTERM (a deploy): stop taking new sessions and let running calls finish (at most DRAIN_MS,
// default 10 s); then stop listening and close once the last connection has ended. A second
// signal stops at once.
let stopping = false;
async function shutdown(signal: NodeJS.Signals): Promise<void> {
  if (stopping) process.exit(1);
  stopping = true;
  const started = Date.now();
  const deadlineMs = Number(process.env.DRAIN_MS ?? 10_000);
  console.log(`koa-example: ${signal}: draining (deadline ${deadlineMs} ms)`);
  try {
    await mcp.drain({ deadlineMs });
    console.log(`koa-example: drained in ${Date.now() - started} ms`);
  } catch (error) {
    console.error(`koa-example: drain failed: ${(error as Error).message}`);
  }
  // What still reaches this instance until the listener is closed is handed over; a connection
  // that somehow outlives that for CLOSE_GRACE_MS (default 5 s) is ended by close().
  let closing: Promise<void> | undefined;
  const close = () => (closing ??= mcp.close());
  const graceMs = Number(process.env.CLOSE_GRACE_MS ?? 5_000);
  const grace = setTimeout(() => {
    console.log(`koa-example: connections still open ${graceMs} ms after the drain: closing them`);
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
