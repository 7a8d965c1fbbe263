/**
 * The headline case of the project, with a short stream TTL: a tool lets go of its client with
 * closeSSEStream and then works in silence for several TTLs while the client keeps polling. The
 * answer must arrive: the stream is live, so its log must not age out, in
 * Redis (keys refreshed while the instance writes to the stream, and by each poll) or in memory.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { closeSSEStream, MemoryEventStore, type EventStore } from '@mcp-kit/core';
import { RedisEventStore } from '@mcp-kit/redis';
import { inProcessAdapters, type ServerUnderTest } from '@mcp-kit/testbed/adapters';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';

const TTL_MS = 300;
const SILENT_MS = 4 * TTL_MS;

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis?.stop();
});

/** A tool that sends one note, lets go of its stream, works silently for `SILENT_MS`, then answers. */
function silentServer(): McpServer {
  const server = new McpServer({ name: 'silent', version: '1.0.0' }, { capabilities: { logging: {} } });
  server.registerTool('silent', {}, async (extra) => {
    await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data: 'started' } });
    closeSSEStream(extra, 100);
    await new Promise((resolve) => setTimeout(resolve, SILENT_MS));
    return { content: [{ type: 'text', text: 'done after a long silence' }] };
  });
  return server;
}

const stores: Array<{ name: string; make: () => Promise<EventStore & { close?(): unknown }> }> = [
  {
    name: 'Redis',
    make: async () => {
      const store = new RedisEventStore({ url: redis.url, streamTtlMs: TTL_MS, keyPrefix: `ttl-${Date.now()}:` });
      await store.ready(5_000);
      return store;
    },
  },
  { name: 'memory', make: async () => new MemoryEventStore({ maxAgeMs: TTL_MS }) },
];

describe.each(inProcessAdapters)('a tool silent for longer than the stream TTL: $name', (adapter) => {
  let sut: ServerUnderTest | undefined;
  let client: Client | undefined;
  let store: (EventStore & { close?(): unknown }) | undefined;
  afterEach(async () => {
    await client?.close();
    await sut?.close();
    await store?.close?.();
  });

  it.each(stores)(
    '$name store: the polling client gets the answer, with nothing lost',
    async ({ make }) => {
      store = await make();
      // Each connection lasts 150 ms (a platform's response limit): the client polls through the silence.
      sut = await adapter.start({ server: () => silentServer(), eventStore: store, retryMs: 100, maxStreamDurationMs: 150 });
      client = new Client({ name: 'ttl', version: '1.0.0' });
      const errors: Error[] = [];
      client.onerror = (e) => errors.push(e);
      await client.connect(new StreamableHTTPClientTransport(new URL(sut.url)));
      const result = await client.callTool({ name: 'silent', arguments: {} }, undefined, { timeout: 10_000 });
      expect(result.content).toEqual([{ type: 'text', text: 'done after a long silence' }]);
      // The client polled through the silence without a refusal.
      expect(errors.filter((e) => /404|410|Maximum reconnection/.test(String(e)))).toEqual([]);
    },
    20_000,
  );
});
