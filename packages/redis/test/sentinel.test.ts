/**
 * Redis behind Sentinel: `createRedisClient({ sentinels, name })` finds the primary
 * through the Sentinels and follows a failover, its duplicates (the subscriber connections) too;
 * and what APPEND says when a frame before the one it is given is missing (what a promoted replica
 * that lacked the primary's last writes makes it say). The scale-out through a failover, with
 * clients, is tests/faults/sentinel-failover.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Redis } from 'ioredis';
import { StreamGap } from '@mcp-kit/core';
import { createRedisClient, RedisEventStore, whenReady } from '@mcp-kit/redis';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';
import { redisCommand } from '@mcp-kit/testbed/redis-command';
import { SENTINEL_NAME, startSentinels, type TestSentinels } from '@mcp-kit/testbed/sentinel';

let sentinels: TestSentinels | undefined;
const clients: Redis[] = [];

afterAll(async () => {
  for (const c of clients) c.disconnect();
  await sentinels?.close();
});

/** Runs `command` until it succeeds (a failover is an outage of a few seconds); throws after `timeoutMs`. */
async function eventually<T>(command: () => Promise<T>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await command();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

describe('createRedisClient with Sentinel', () => {
  it('connects to the primary the Sentinels name, and after a failover to the promoted replica, its duplicates too', async () => {
    sentinels = await startSentinels();
    const target = { sentinels: sentinels.sentinelPorts.map((port) => ({ host: '127.0.0.1', port })), name: SENTINEL_NAME };
    const client = createRedisClient(target, { connectionName: 'sentinel-test' });
    clients.push(client);
    await whenReady(client, 10_000);
    expect(client.options.sentinels).toEqual(target.sentinels);
    await client.set('k', 'before');
    const subscriber = client.duplicate({ connectionName: 'sentinel-test-sub' });
    clients.push(subscriber);
    subscriber.on('error', () => {}); // it reconnects by itself
    const heard: string[] = [];
    subscriber.on('message', (_channel: string, message: string) => heard.push(message));
    await whenReady(subscriber, 10_000);
    await subscriber.subscribe('ch');
    expect(await client.call('ROLE').then((r) => (r as unknown[])[0])).toBe('master');

    await sentinels.killPrimary();
    const promoted = await sentinels.promoted();
    expect(promoted).toBe(sentinels.replicaPort);
    // The replica had the write; the client writes to it now, as its primary.
    expect(await eventually(() => client.get('k'))).toBe('before');
    await eventually(() => client.set('k', 'after'));
    expect(await client.call('ROLE').then((r) => (r as unknown[])[0])).toBe('master');
    expect(await client.call('CONFIG', 'GET', 'port').then((r) => Number((r as string[])[1]))).toBe(promoted);
    // The subscriber came back on the new primary (ioredis subscribes again after a reconnect).
    await eventually(async () => {
      await client.publish('ch', 'after the failover');
      if (!heard.includes('after the failover')) throw new Error(`heard ${heard.join(', ')}`);
    });
  }, 60_000);
});

describe('APPEND, a frame before the one given missing', () => {
  // One server for the tests here (each its own session's keys), stopped after them.
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it("is refused with core's StreamGap naming the first missing frame", async () => {
    const store = new RedisEventStore({ url: redis.url });
    try {
      await store.ready(5_000);
      const key = { sessionId: 'sess-gap', streamId: 'gap'.padEnd(22, '0') };
      await store.createStream(key, ['1']);
      await store.append(key, 1, 'id: x.1\ndata: {}\n\n', false);
      const refused = await Promise.resolve(store.append(key, 3, 'id: x.3\ndata: {}\n\n', false)).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(StreamGap);
      expect(refused).toMatchObject({ name: 'StreamGap', missingSeq: 2 });
      expect((refused as Error).message).toContain('frame 2 of this stream is not stored yet');
      // Once frame 2 is in, frame 3 is taken.
      await store.append(key, 2, 'id: x.2\ndata: {}\n\n', false);
      await store.append(key, 3, 'id: x.3\ndata: {}\n\n', false);
    } finally {
      await store.close();
    }
  });

  it('appendFinalAfterLoss stores the final frame past frames Redis lost; a replay across the gap gets it as the end, a tail ends to be resumed', async () => {
    const store = new RedisEventStore({ url: redis.url });
    try {
      await store.ready(5_000);
      const key = { sessionId: 'sess-lost', streamId: 'lost'.padEnd(22, '0') };
      await store.createStream(key, ['1']);
      for (let seq = 1; seq <= 3; seq++) await store.append(key, seq, `id: x.${seq}\ndata: {}\n\n`, false);
      // A client read up to 1 and follows the stream live on another instance: it gets 2 and 3.
      const ended: string[] = [];
      const frames: number[] = [];
      const tail = await store.subscribe!(key, 1, {
        frame: (_frame, seq) => frames.push(seq),
        closed: () => ended.push('closed'),
        end: (reason) => ended.push(reason),
      });
      await vi.waitFor(() => expect(frames).toEqual([2, 3]));
      // What a failover to a lagging replica does: frames 2 and 3 are gone though they were
      // acknowledged, and the writer is on a new connection (the store checks for a gap on each new one).
      await redisCommand(redis.port, 'XDEL', `mcp-kit:{${key.sessionId}}:${key.streamId}`, '2-0', '3-0');
      const back = new Promise((resolve) => store.client.once('ready', resolve));
      store.client.disconnect(true);
      await back;
      const refused = await Promise.resolve(store.append(key, 4, 'id: x.4\ndata: {}\n\n', false)).catch((error: unknown) => error);
      expect(refused).toMatchObject({ name: 'StreamGap', missingSeq: 2 });
      const final = 'id: x.5\ndata: {"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"lost"}}\n\n';
      await store.appendFinalAfterLoss(key, 5, final);
      expect(await store.replayAfter(key.sessionId, key.streamId, 1)).toEqual({ ok: false, reason: 'evicted', final });
      expect(await store.replayAfter(key.sessionId, key.streamId, 3)).toEqual({ ok: false, reason: 'evicted', final });
      // The tail cannot bridge the gap: it ends (its client resumes, and hears the end).
      await vi.waitFor(() => expect(ended).toEqual(['error']));
      expect(frames).toEqual([2, 3]);
      tail.cancel();
      // Nothing goes after it, past a loss or not.
      await expect(store.appendFinalAfterLoss(key, 6, final)).rejects.toThrow(/this stream is complete/);
    } finally {
      await store.close();
    }
  });
});
