/**
 * What one instance holds per session and per stream is bounded by what is live (invariant:
 * bounded): 10,000 streams opened and abandoned — standalone `GET` streams of sessions that are then let
 * go (their clients leave; the sessions are evicted at `maxSessions` or expire), and `tools/call`
 * requests cancelled with `notifications/cancelled` (half of them after their client left the
 * stream) — next to a few sessions that stay, each with a call running. Afterwards the store keeps
 * alive (re-`PEXPIRE`s) exactly the streams still written here, their abandoned keys age out in
 * Redis, and the sessions that stay hold only their live streams and requests, until a drain
 * hands them off too.
 *
 * A shared cluster on one instance: a session let go there lives on in Redis (another copy may
 * serve it), so nothing deletes its events and only the engine can tell the store it writes no more.
 */
import { Agent, request, type IncomingMessage } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { McpHandler } from '@mcp-kit/core';
import { retainedBy } from '@mcp-kit/core/internal';
import { createRedisScaleOut, type RedisEventStore, type RedisScaleOut } from '@mcp-kit/redis';
import { expressAdapter, type ServerUnderTest } from '@mcp-kit/testbed/adapters';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';
import { callTool, initializeRequest, LEGACY } from '@mcp-kit/testbed/requests';
import { http, openSession, type SseStream } from '@mcp-kit/testbed/fetch-client';

/** Sessions that stay, each with its standalone stream open and one call running. */
const KEPT = 4;
/** Standalone streams of sessions let go, and requests cancelled: 10,000 streams in all. */
const STANDALONE = 2_500;
const CANCELLED = 7_500;
const BATCH = 50;
const STREAM_TTL_MS = 1_500;
const PREFIX = 'bounded:';

let redis: TestRedis;
let admin: Redis;
let scale: RedisScaleOut | undefined;
let sut: ServerUnderTest | undefined;

beforeAll(async () => {
  redis = await startRedis();
  admin = new Redis(redis.url);
});

afterAll(async () => {
  await sut?.close();
  admin?.disconnect();
  await redis?.stop();
});

/** A tool that runs until its request is cancelled. */
function waitingServer(): McpServer {
  const server = new McpServer({ name: 'waits', version: '1.0.0' });
  server.registerTool(
    'wait',
    {},
    (extra) => new Promise((resolve) => extra.signal.addEventListener('abort', () => resolve({ content: [] }), { once: true })),
  );
  return server;
}

/** What the handler holds per session, and the streams the store keeps alive. */
function held(handler: McpHandler, store: RedisEventStore) {
  return { ...retainedBy(handler), liveStreams: store.liveStreamCount };
}

/** Polls `condition` until it holds or `timeoutMs` passes (for what a timer does: expiry, TTLs). */
async function until(condition: () => boolean | Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function inBatches(count: number, each: (i: number) => Promise<void>, between?: () => Promise<void>): Promise<void> {
  for (let i = 0; i < count; i += BATCH) {
    await Promise.all(Array.from({ length: Math.min(BATCH, count - i) }, (_, j) => each(i + j)));
    await between?.();
  }
}

// The bulk of the traffic goes through node:http on kept-alive sockets: 10,000 streams through
// fetch cost more CPU in this process than the server does.
const agent = new Agent({ keepAlive: true });

/** Sends a request; resolves with its response once the headers are in. */
function send(url: string, method: string, headers: Record<string, string>, body?: unknown): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const accept = method === 'GET' ? 'text/event-stream' : 'application/json, text/event-stream';
    const all = { accept, 'content-type': 'application/json', 'mcp-protocol-version': LEGACY, ...headers };
    request(url, { method, agent, headers: all }, resolve)
      .on('error', reject)
      .end(body === undefined ? undefined : JSON.stringify(body));
  });
}

/** Resolves once an SSE response has sent its first event (the priming event: the stream is registered). */
function primed(res: IncomingMessage): Promise<void> {
  if (!String(res.headers['content-type']).startsWith('text/event-stream')) throw new Error(`not an SSE response: ${res.statusCode}`);
  return new Promise((resolve, reject) => {
    let text = '';
    const onData = (chunk: Buffer) => {
      text += chunk.toString();
      if (!text.includes('\n\n')) return;
      res.off('data', onData);
      resolve();
    };
    res.on('data', onData).once('error', reject);
    res.once('end', () => reject(new Error(`ended before its first event: ${text}`)));
  });
}

/** Resolves once the server has ended the response. */
function ended(res: IncomingMessage): Promise<void> {
  return new Promise((resolve, reject) => {
    if (res.complete) return resolve();
    res.once('end', resolve).once('error', reject).resume();
  });
}

/** Redis keys of session indexes and streams under the test's prefix. */
async function streamKeys(): Promise<number> {
  let cursor = '0';
  let n = 0;
  do {
    const [next, keys] = await admin.scan(cursor, 'MATCH', `${PREFIX}{*`, 'COUNT', 1_000);
    cursor = next;
    n += keys.length;
  } while (cursor !== '0');
  return n;
}

describe('LiveStreams and the per-session maps are bounded', () => {
  it('10,000 standalone and cancelled streams opened and abandoned: what is held returns to what is live', async () => {
    const started = Date.now();
    scale = createRedisScaleOut({ url: redis.url, mode: 'shared', keyPrefix: PREFIX, streamTtlMs: STREAM_TTL_MS });
    await scale.ready(5_000);
    sut = await expressAdapter.start({
      server: () => waitingServer(),
      eventStore: scale.eventStore,
      cluster: scale.cluster,
      taskStore: scale.taskStore,
      retryMs: 200,
      maxSessions: 100,
      sessionIdleTtlMs: 3_000,
    });
    const handler = sut.inProcess!.handler;
    const store = scale.eventStore;
    const { url } = sut;
    const api = http(url);
    const state = () => held(handler, store);

    // The sessions that stay: a standalone stream open, and a call running.
    const kept: Array<{ headers: Record<string, string>; streams: SseStream[] }> = [];
    for (let k = 0; k < KEPT; k++) {
      const { headers } = await openSession(api);
      const standalone = await api.getSse(headers);
      await standalone.next();
      const running = await api.postSse(callTool(1, 'wait'), headers);
      await running.next();
      kept.push({ headers, streams: [standalone, running] });
    }
    const baseline = state().connections;
    expect(baseline).toBe(2 * KEPT);
    const connectionsBackTo = async (n: number) => {
      if (!(await until(() => state().connections === n, 5_000))) expect(state()).toEqual({ connections: n });
    };

    // Standalone streams of sessions whose clients leave: evicted at maxSessions, the last ones expire.
    await inBatches(
      STANDALONE,
      async () => {
        // A client that opens its standalone stream right after the handshake, then leaves.
        const initialize = await send(url, 'POST', {}, initializeRequest(1));
        await ended(initialize);
        const standalone = await send(url, 'GET', { 'mcp-session-id': String(initialize.headers['mcp-session-id']) });
        await primed(standalone);
        standalone.destroy();
      },
      () => connectionsBackTo(baseline),
    );

    const standaloneMs = Date.now() - started;
    // Calls cancelled on the sessions that stay: half while their client reads the stream, half after it left.
    let nextId = 100;
    for (let b = 0; b < CANCELLED / BATCH; b++) {
      const { headers } = kept[b % KEPT]!;
      const calls = await Promise.all(
        Array.from({ length: BATCH }, async () => {
          const id = nextId++;
          const stream = await send(url, 'POST', headers, callTool(id, 'wait'));
          await primed(stream); // the call is running
          return { id, stream };
        }),
      );
      const away = b % 2 === 1;
      if (away) {
        for (const { stream } of calls) stream.destroy();
        await connectionsBackTo(baseline);
      }
      await Promise.all(
        calls.map(async ({ id, stream }) => {
          const ack = await send(url, 'POST', headers, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id } });
          await ended(ack);
          expect(ack.statusCode).toBe(202);
          // Its stream ends once the cancel is taken, with no answer.
          if (!away) await ended(stream);
        }),
      );
    }
    // The sessions let go have all gone (the last ones by expiry).
    expect(await until(() => state().sessions === KEPT, 10_000)).toBe(true);
    await connectionsBackTo(baseline);
    const after = state();
    console.log(
      `${STANDALONE} standalone streams in ${standaloneMs} ms, ${CANCELLED} cancelled in ${Date.now() - started - standaloneMs} ms; held:`,
      after,
    );
    expect(after).toEqual({
      sessions: KEPT,
      connections: 2 * KEPT,
      // The store keeps alive only the streams still written here: each kept session's standalone stream and running call.
      liveStreams: 2 * KEPT,
      streams: 2 * KEPT,
      requests: KEPT,
      awaited: 0,
      outliving: 0,
    });
    // What was abandoned ages out in Redis: the kept sessions' index, streams and the running call's request list stay.
    expect(await until(async () => (await streamKeys()) <= 4 * KEPT, 4 * STREAM_TTL_MS)).toBe(true);
    // A drain hands the sessions that stay off (their calls cut at the deadline): the store keeps none alive.
    await handler.drain({ deadlineMs: 0 });
    expect(state()).toMatchObject({ sessions: 0, streams: 0, liveStreams: 0 });
    for (const { streams } of kept) for (const s of streams) s.abort();
    agent.destroy();
  }, 120_000);
});
