/**
 * RedisEventStore against a real redis-server: the same EventStore contract the memory store
 * passes, the live-tail contract, and what is Redis-specific (keys, TTL, MAXLEN, failures).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import type { EventStore, StreamKey } from '@mcp-kit/core';
import { RedisEventStore } from '@mcp-kit/redis';
import { eventStoreContract, frame, frames, subscribeContract, type ContractLimits } from '../../core/test/store-contract.js';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';

let redis: TestRedis;
const stores: RedisEventStore[] = [];
let admin: Redis;

beforeAll(async () => {
  redis = await startRedis();
  admin = new Redis(redis.url);
});

afterAll(async () => {
  for (const s of stores) await s.close();
  admin?.disconnect();
  await redis?.stop();
});

async function makeStore(
  limits: ContractLimits & { streamTtlMs?: number; keyPrefix?: string } = {},
): Promise<EventStore & RedisEventStore> {
  const store = new RedisEventStore({ url: redis.url, ...limits });
  stores.push(store);
  await store.ready(5_000);
  return store;
}

eventStoreContract('RedisEventStore', (limits) => makeStore(limits));
subscribeContract('RedisEventStore', (limits) => makeStore(limits));

const key = (name: string): StreamKey => ({ sessionId: `sess-${name}`, streamId: `${name}`.padEnd(22, '0') });

describe('RedisEventStore: keys, limits and failures', () => {
  it('keeps one Redis Stream per (session, stream) with entry ids <seq>-0, exactly MAXLEN entries, a TTL, and the stream registered in its session', async () => {
    const store = await makeStore({ maxEventsPerStream: 5, streamTtlMs: 60_000, keyPrefix: 'kt:' });
    const A = key('layout');
    await store.createStream(A);
    for (let seq = 1; seq <= 8; seq++) await store.append(A, seq, frame(A, seq), seq === 8);
    const streamKey = `kt:{${A.sessionId}}:${A.streamId}`;
    expect(await admin.type(streamKey)).toBe('stream');
    expect(await admin.xlen(streamKey)).toBe(5);
    const entries = await admin.xrange(streamKey, '-', '+');
    expect(entries.map(([id]) => id)).toEqual(['4-0', '5-0', '6-0', '7-0', '8-0']);
    expect(entries[4]![1]).toEqual(['f', frame(A, 8), 'e', '1']);
    // streamTtlMs and a third: refreshed every third of it while written, so at least streamTtlMs past the last frame.
    const ttl = await admin.pttl(streamKey);
    expect(ttl).toBeGreaterThan(70_000);
    expect(ttl).toBeLessThanOrEqual(80_000);
    const session = await admin.hgetall(`kt:{${A.sessionId}}:s`);
    expect(Object.values(session).map((v) => JSON.parse(v) as unknown)).toEqual([[A.streamId, '', []]]);
    expect(await admin.pttl(`kt:{${A.sessionId}}:s`)).toBeGreaterThan(50_000);
  });

  it("a stream whose only frame is its final one is a string (a tenth of a Redis stream's memory), replayed like any", async () => {
    const store = await makeStore({ streamTtlMs: 60_000, keyPrefix: 'one:' });
    const A = key('one');
    await store.createStream(A, [7]);
    await store.append(A, 1, frame(A, 1), true);
    const streamKey = `one:{${A.sessionId}}:${A.streamId}`;
    expect(await admin.type(streamKey)).toBe('string');
    expect(await admin.pttl(streamKey)).toBeGreaterThan(50_000);
    expect(await store.replayAfter(A.sessionId, A.streamId, 0)).toEqual({ ok: true, frames: [frame(A, 1)], lastSeq: 1, complete: true });
    expect(await store.replayAfter(A.sessionId, A.streamId, 1)).toEqual({ ok: true, frames: [], lastSeq: 1, complete: true });
    expect(await store.replayAfter(A.sessionId, A.streamId, 2)).toEqual({ ok: false, reason: 'unknown' });
    // Stored once; nothing goes after it.
    await store.append(A, 1, frame(A, 1), true);
    await expect(store.append(A, 2, frame(A, 2), false)).rejects.toMatchObject({ name: 'StreamTakenOver' });
    expect(await store.unfinished(A.sessionId)).toEqual([]);
  });

  it('a stream this instance still writes to outlives streamTtlMs of silence; once its final frame is stored it ages out', async () => {
    const store = await makeStore({ keyPrefix: 'live:', streamTtlMs: 200 });
    const A = key('live');
    const B = key('standalone');
    await store.createStream(A);
    await store.createStream(B);
    await store.append(A, 1, frame(A, 1), false);
    // Five TTLs without a write or a read (time itself is what is tested).
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(await store.replayAfter(A.sessionId, A.streamId, 0)).toMatchObject({ ok: true, lastSeq: 1, complete: false });
    expect(await store.replayAfter(B.sessionId, B.streamId, 0)).toMatchObject({ ok: true, lastSeq: 0 });
    await store.append(A, 2, frame(A, 2), true);
    // Finished: its keys are no longer refreshed and expire within a TTL or two (Redis expires lazily).
    const deadline = Date.now() + 5_000;
    let replay = await store.replayAfter(A.sessionId, A.streamId, 0);
    while (replay.ok && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      replay = await store.replayAfter(A.sessionId, A.streamId, 0);
    }
    expect(replay).toEqual({ ok: false, reason: 'unknown' });
    await store.deleteSession(B.sessionId);
  });

  it('a frame is stored once even when its write is retried, and never after a missing one', async () => {
    const store = await makeStore({ keyPrefix: 'gap:' });
    const A = key('retried');
    await store.createStream(A);
    await store.append(A, 1, frame(A, 1), false);
    // A retry whose first reply was lost: stored once, not twice.
    await store.append(A, 1, frame(A, 1), false);
    // Frame 2 failed: frame 3 is refused until 2 is in, then goes in after it.
    await expect(store.append(A, 3, frame(A, 3), true)).rejects.toThrow(/frame 2 of this stream is not stored yet/);
    await store.append(A, 2, frame(A, 2), false);
    await store.append(A, 3, frame(A, 3), true);
    // Nothing after the final frame (a stale owner writing past a new owner's answer).
    await expect(store.append(A, 4, frame(A, 4), false)).rejects.toThrow(/this stream is complete/);
    const streamKey = `gap:{${A.sessionId}}:${A.streamId}`;
    expect((await admin.xrange(streamKey, '-', '+')).map(([id]) => id)).toEqual(['1-0', '2-0', '3-0']);
    expect(await store.replayAfter(A.sessionId, A.streamId, 0)).toEqual({ ok: true, frames: frames(A, 1, 3), lastSeq: 3, complete: true });
  });

  it('a replay with a hole in it is refused as evicted, never partial; with the final frame stored, that frame comes along', async () => {
    const store = await makeStore({ keyPrefix: 'hole:' });
    const A = key('hole');
    await store.createStream(A);
    await store.append(A, 1, frame(A, 1), false);
    await store.append(A, 2, frame(A, 2), false);
    const streamKey = `hole:{${A.sessionId}}:${A.streamId}`;
    // What a Redis that lost a write leaves: 1, 3 (as if 2 never made it).
    await admin.xdel(streamKey, '2-0');
    await admin.xadd(streamKey, '3-0', 'f', frame(A, 3), 'e', '0');
    expect(await store.replayAfter(A.sessionId, A.streamId, 0)).toEqual({ ok: false, reason: 'evicted' });
    expect(await store.replayAfter(A.sessionId, A.streamId, 2)).toMatchObject({ ok: true, frames: [frame(A, 3)], lastSeq: 3 });
    await admin.xadd(streamKey, '4-0', 'f', frame(A, 4), 'e', '1');
    expect(await store.replayAfter(A.sessionId, A.streamId, 1)).toEqual({ ok: false, reason: 'evicted', final: frame(A, 4) });
  });

  it("keeps the retry of a stream's last closeTails for replays on any instance, and drops it with the session", async () => {
    const store = await makeStore({ streamTtlMs: 60_000, keyPrefix: 'rt:' });
    const other = await makeStore({ streamTtlMs: 60_000, keyPrefix: 'rt:' });
    const A = key('retry');
    await store.createStream(A);
    await store.append(A, 1, frame(A, 1), false);
    // No close yet: nothing to say, the handler's own retry applies.
    expect(await other.replayAfter(A.sessionId, A.streamId, 0)).toEqual({ ok: true, frames: [frame(A, 1)], lastSeq: 1, complete: false });
    await store.closeTails(A, 1, 2_500);
    await store.closeTails(A, 1, 750);
    expect(await other.replayAfter(A.sessionId, A.streamId, 0)).toEqual({
      ok: true,
      frames: [frame(A, 1)],
      lastSeq: 1,
      complete: false,
      retryMs: 750,
    });
    const retryKey = `rt:{${A.sessionId}}:${A.streamId}:retry`;
    expect(await admin.pttl(retryKey)).toBeGreaterThan(50_000);
    await store.deleteSession(A.sessionId);
    expect(await admin.exists(retryKey)).toBe(0);
    expect(await other.replayAfter(A.sessionId, A.streamId, 0)).toEqual({ ok: false, reason: 'unknown' });
  });

  it('a stream whose instance is gone expires streamTtlMs after its last append: its cursors become unknown', async () => {
    const writer = await makeStore({ streamTtlMs: 150 });
    const store = await makeStore({ streamTtlMs: 150 });
    const A = key('ttl');
    await writer.append(A, 1, frame(A, 1), false);
    expect(await store.replayAfter(A.sessionId, A.streamId, 0)).toEqual({ ok: true, frames: [frame(A, 1)], lastSeq: 1, complete: false });
    await writer.close(); // no longer keeps the stream alive
    const deadline = Date.now() + 5_000;
    while ((await admin.exists(`mcp-kit:{${A.sessionId}}:${A.streamId}`)) === 1 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    expect(await store.replayAfter(A.sessionId, A.streamId, 0)).toEqual({ ok: false, reason: 'unknown' });
  });

  it('replay cost does not depend on what else the store holds: one round trip for the slice asked', async () => {
    const store = await makeStore();
    const target = key('target');
    const other = key('other');
    for (let seq = 1; seq <= 2_000; seq++) await store.append(other, seq, 'x', false);
    for (let seq = 1; seq <= 10; seq++) await store.append(target, seq, frame(target, seq), false);
    expect(await store.replayAfter(target.sessionId, target.streamId, 7)).toEqual({
      ok: true,
      frames: frames(target, 8, 10),
      lastSeq: 10,
      complete: false,
    });
  });

  it('rejects bad options with errors that name them', () => {
    expect(() => new RedisEventStore({})).toThrow(/give `url`/);
    expect(() => new RedisEventStore({ url: redis.url, maxEventsPerStream: 0 })).toThrow(
      'RedisEventStore: maxEventsPerStream must be a positive integer, got 0',
    );
    expect(() => new RedisEventStore({ url: redis.url, streamTtlMs: 1.5 })).toThrow(/streamTtlMs/);
  });

  it('a slow Redis: a command with no reply within commandTimeoutMs fails instead of hanging, and the next ones work again once its connection is made again', async () => {
    const store = new RedisEventStore({ url: redis.url, commandTimeoutMs: 200 });
    stores.push(store);
    await store.ready(5_000);
    const A = key('slow');
    await store.append(A, 1, frame(A, 1), false);
    await admin.call('CLIENT', 'PAUSE', '1000', 'ALL');
    const started = Date.now();
    await expect(store.replayAfter(A.sessionId, A.streamId, 0)).rejects.toThrow(/timed out/i);
    expect(Date.now() - started).toBeLessThan(900);
    await admin.call('CLIENT', 'UNPAUSE');
    // A connection silent for commandTimeoutMs with a command waiting is dropped (a black hole
    // looks no different from where the client stands), and made again.
    await store.ready(5_000);
    expect(await store.replayAfter(A.sessionId, A.streamId, 0)).toEqual({ ok: true, frames: [frame(A, 1)], lastSeq: 1, complete: false });
  });

  it('while Redis is unreachable every method rejects fast (no queue), and works again once Redis is back', async () => {
    const store = await makeStore();
    const A = key('outage');
    await store.append(A, 1, frame(A, 1), false);
    await redis.stop();
    try {
      const started = Date.now();
      await expect(store.append(A, 2, frame(A, 2), false)).rejects.toThrow();
      await expect(store.replayAfter(A.sessionId, A.streamId, 0)).rejects.toThrow();
      await expect(store.subscribe(A, 0, { frame() {}, end() {}, closed() {} })).rejects.toThrow();
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      await redis.start();
    }
    // The restarted server is empty; the store reconnects by itself.
    const deadline = Date.now() + 10_000;
    for (;;) {
      try {
        await store.append(A, 5, frame(A, 5), false);
        break;
      } catch (error) {
        if (Date.now() > deadline) throw error;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    expect(await store.replayAfter(A.sessionId, A.streamId, 4)).toEqual({ ok: true, frames: [frame(A, 5)], lastSeq: 5, complete: false });
  });
});
