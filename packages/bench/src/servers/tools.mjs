// The MCP surface every benchmarked MCP server serves: the shared fixture plus `bench_burst`.
import { createFixtureServer } from '@mcp-kit/fixtures';
import { z } from 'zod';

/** ~16 characters of payload; with the envelope the JSON-RPC notification is ~100 bytes. */
export const BURST_PAYLOAD = 'x'.repeat(12);

/** Yield to the event loop this often, as a real producer would, so sockets drain between runs. */
export const BURST_YIELD_EVERY = 100;

/**
 * A fresh McpServer for one session: the fixture (what the example apps serve) and `bench_burst`,
 * which sends `count` log notifications on the request's stream as fast as the transport takes them.
 */
export function createBenchServer(name) {
  const server = createFixtureServer({ name });
  server.registerTool(
    'bench_burst',
    {
      description: 'Sends `count` ~100-byte notifications/message on this request stream, then returns',
      inputSchema: { count: z.number().int().min(0).max(1_000_000) },
    },
    async ({ count }, extra) => {
      for (let i = 1; i <= count; i++) {
        await extra.sendNotification({
          method: 'notifications/message',
          params: { level: 'info', logger: 'bench', data: `${BURST_PAYLOAD}${i % 10_000}` },
        });
        if (i % BURST_YIELD_EVERY === 0) await new Promise((resolve) => setImmediate(resolve));
      }
      return { content: [{ type: 'text', text: `burst ${count}` }] };
    },
  );
  return server;
}

/** Settings every server process reads from its environment, so one run configures all alike. */
export function benchEnv(env = process.env) {
  return {
    port: Number(env.PORT ?? 0),
    host: env.HOST ?? '127.0.0.1',
    json: env.BENCH_JSON === '1',
    retryMs: Number(env.BENCH_RETRY_MS ?? 1000),
    // The resume workload keeps up to 1M events; the memory store's default (64 MiB) evicts first.
    storeMaxBytes: env.BENCH_STORE_MAX_BYTES ? Number(env.BENCH_STORE_MAX_BYTES) : undefined,
    // The memory workload opens 10,000 sessions; mcp-kit's default cap is exactly 10,000.
    maxSessions: Number(env.BENCH_MAX_SESSIONS ?? 20_000),
    // mcp-kit only: which SDK major's McpServer it serves (`v1`: createBenchServer, `v2`: tools-v2.mjs).
    sdk: env.BENCH_SDK === 'v2' ? 'v2' : 'v1',
    // mcp-kit only: hibernate idle sessions (off unless set).
    hibernateAfterMs: env.BENCH_HIBERNATE_MS === undefined ? undefined : Number(env.BENCH_HIBERNATE_MS),
    // mcp-kit only: an OAuth resource server; every request carries a JWT (servers/auth.mjs).
    auth: env.BENCH_AUTH === '1',
    // mcp-kit only: record it with `@mcp-kit/core/otel` into the OpenTelemetry SDK (in-memory exporters).
    otel: env.BENCH_OTEL === '1',
  };
}
