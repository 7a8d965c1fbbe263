/**
 * The owner fence of a forwarding cluster (invariant: one-owner), against a real redis-server: every
 * write an owner makes in a session (APPEND, CREATE, CLOSE, RELEASE, its restore record) is
 * refused once the session is not its own, and a missing owner record counts as its own only when
 * Redis lost its data since this instance last wrote its records (then it is only not written back
 * yet). After such a loss the owner records written back go to the instance that took the session
 * last, whichever instance beats first.
 *
 * Heartbeats are a minute apart: each test beats by hand, so the order of events is the test's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import type { RestoreRecord, StreamKey } from '@mcp-kit/core';
import { createRedisScaleOut, RedisEventStore, RedisSessionCluster, type RedisScaleOut } from '@mcp-kit/redis';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';

let redis: TestRedis;
let admin: Redis;
const scaleOuts: RedisScaleOut[] = [];

beforeAll(async () => {
  redis = await startRedis();
  admin = new Redis(redis.url);
});

afterAll(async () => {
  for (const s of scaleOuts) {
    await s.cluster.close();
    await s.eventStore.close();
  }
  admin?.disconnect();
  await redis?.stop();
});

async function instance(name: string, prefix: string): Promise<RedisScaleOut> {
  const s = createRedisScaleOut({
    url: redis.url,
    internalUrl: `http://${name}.internal/mcp`,
    instanceId: name,
    keyPrefix: prefix,
    heartbeatMs: 60_000,
  });
  scaleOuts.push(s);
  await s.ready(5_000);
  return s;
}

/** One heartbeat now (the interval is a minute away). */
const beat = (c: RedisSessionCluster) => (c as unknown as { registry: { heartbeat(): Promise<void> } }).registry.heartbeat();

const record = (name: string): RestoreRecord => ({
  initialize: {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name, version: '1' } },
  },
  protocolVersion: '2025-11-25',
});

const frameOf = (key: StreamKey, seq: number) => `id: ${key.streamId}.${seq}\ndata: {"seq":${seq}}\n\n`;
const streamKey = (name: string): StreamKey => ({ sessionId: `sess-${name}`, streamId: name.padEnd(22, '0') });

/**
 * A owns a session with a running stream; A is then away past its window (its instance key gone,
 * as after a pause), and B takes the session over for the client's next request. A has not beaten
 * since: it still holds the session and its stream.
 */
async function takenOverFromStaleA(name: string) {
  const prefix = `${name}:`;
  const a = await instance(`a-${name}`, prefix);
  const b = await instance(`b-${name}`, prefix);
  const key = streamKey(name);
  await a.cluster.open(key.sessionId, undefined);
  await a.cluster.saveRecord(key.sessionId, record('a'), 60_000);
  await a.eventStore.createStream(key, [7]);
  await a.eventStore.append(key, 1, frameOf(key, 1), false);
  await admin.del(`${prefix}instance:a-${name}`);
  expect(await b.cluster.owners!.takeOver(key.sessionId, undefined)).toEqual({ record: record('a'), principal: undefined });
  return { a, b, key };
}

describe('a stale owner writes nothing in a session that is not its own any more', () => {
  it('taken over (the record names the peer): its APPEND, CREATE and CLOSE are refused for good', async () => {
    const { a, key } = await takenOverFromStaleA('f1');
    await expect(a.eventStore.append(key, 2, frameOf(key, 2), false)).rejects.toMatchObject({ name: 'StreamTakenOver' });
    // A new stream (a request the stale copy still took) and a closeSSEStream of its old one.
    const other = { sessionId: key.sessionId, streamId: 'other'.padEnd(22, '0') };
    await expect(a.eventStore.createStream(other, [8])).rejects.toMatchObject({ name: 'StreamTakenOver' });
    expect(JSON.stringify(await admin.hvals(`f1:{${key.sessionId}}:s`))).not.toContain(other.streamId);
    await expect(a.eventStore.closeTails(key, 1, 5_000)).rejects.toMatchObject({ name: 'StreamTakenOver' });
    expect(await admin.exists(`f1:{${key.sessionId}}:${key.streamId}:retry`)).toBe(0);
  });

  it('handed off by its new owner (no owner record, the restore record kept for the next instance): refused, and its release deletes nothing', async () => {
    const { a, b, key } = await takenOverFromStaleA('f2');
    await b.cluster.saveRecord(key.sessionId, record('b'), 60_000);
    await b.cluster.letGo(key.sessionId);
    expect(await admin.hexists(`f2:{${key.sessionId}}:s`, 'o')).toBe(0);
    await expect(a.eventStore.append(key, 2, frameOf(key, 2), false)).rejects.toMatchObject({ name: 'StreamTakenOver' });
    await expect(a.eventStore.createStream({ sessionId: key.sessionId, streamId: 'x'.padEnd(22, '0') })).rejects.toMatchObject({
      name: 'StreamTakenOver',
    });
    await expect(a.eventStore.closeTails(key, 1, 5_000)).rejects.toMatchObject({ name: 'StreamTakenOver' });
    // Its restore record is B's, for whichever instance the client reaches next: A neither
    // overwrites it nor deletes it (an idle expiry of A's stale copy).
    await a.cluster.saveRecord(key.sessionId, record('a, stale'), 60_000);
    expect(await a.cluster.end(key.sessionId)).toBe(false);
    expect(JSON.parse((await admin.hget(`f2:{${key.sessionId}}:s`, 'r'))!).a.clientInfo.name).toBe('b');
    const c = await instance('c-f2', 'f2:');
    expect(await c.cluster.owners!.takeOver(key.sessionId, undefined)).toEqual({ record: record('b'), principal: undefined });
  });

  it('deleted by its new owner (both records gone): a stale save does not bring the session back', async () => {
    const { a, b, key } = await takenOverFromStaleA('f3');
    expect(await b.cluster.end(key.sessionId)).toBe(true);
    await a.cluster.saveRecord(key.sessionId, record('a, stale'), 60_000);
    expect(await admin.hexists(`f3:{${key.sessionId}}:s`, 'r')).toBe(0);
    const c = await instance('c-f3', 'f3:');
    expect(await c.cluster.owners!.takeOver(key.sessionId, undefined)).toBeUndefined();
  });
  it("closing (a shutdown without drain) deletes the owner records that name it, never the peer's", async () => {
    const { a, key } = await takenOverFromStaleA('f4');
    // A session A still owns (its record names A, written as a claim would).
    await admin.hset('f4:{sess-f4-own}:s', 'o', 'a-f4', 'u', 'http://a-f4.internal/mcp');
    (a.cluster as unknown as { mode: { owned: Map<string, unknown> } }).mode.owned.set('sess-f4-own', { epoch: '', principal: '' });
    await a.cluster.close();
    expect(await admin.hget(`f4:{${key.sessionId}}:s`, 'o')).toBe('b-f4');
    expect(await admin.hexists('f4:{sess-f4-own}:s', 'o')).toBe(0);
  });
});

describe('after Redis lost its data (restarted empty)', () => {
  it('the owner goes on writing before its next beat writes its records back, whether or not a peer beat first; then they are fenced again', async () => {
    const a = await instance('a-l1', 'l1:');
    const b = await instance('b-l1', 'l1:');
    const key = streamKey('l1');
    await a.cluster.open(key.sessionId, undefined);
    await a.eventStore.createStream(key, [7]);
    await a.eventStore.append(key, 1, frameOf(key, 1), false);
    await admin.flushall();
    // Nobody has beaten since: the records are not back yet.
    await a.eventStore.append(key, 2, frameOf(key, 2), false);
    await a.eventStore.closeTails(key, 2, 1_000);
    // A peer beats first (a new data generation); A's record is still not back.
    await beat(b.cluster);
    await a.eventStore.append(key, 3, frameOf(key, 3), false);
    await a.eventStore.createStream({ sessionId: key.sessionId, streamId: 'new'.padEnd(22, '0') });
    await beat(a.cluster);
    expect(await admin.hget(`l1:{${key.sessionId}}:s`, 'o')).toBe('a-l1');
    await a.eventStore.append(key, 4, frameOf(key, 4), true);
    // Redis has its data: a record that goes now was ended on purpose, and fences A out.
    await admin.hdel(`l1:{${key.sessionId}}:s`, 'o', 'u', 'e');
    const later = { sessionId: key.sessionId, streamId: 'later'.padEnd(22, '0') };
    await expect(a.eventStore.createStream(later)).rejects.toMatchObject({ name: 'StreamTakenOver' });
  });

  it('the instance that took the session over keeps it, though the one it took it from beats first; that one lets go', async () => {
    const { a, b, key } = await takenOverFromStaleA('l2');
    const lostOnA: string[] = [];
    const lostOnB: string[] = [];
    a.cluster.onLetGo((id) => lostOnA.push(id));
    b.cluster.onLetGo((id) => lostOnB.push(id));
    await admin.flushall();
    await beat(a.cluster); // the stale one first
    await beat(b.cluster);
    expect(await admin.hget(`l2:{${key.sessionId}}:s`, 'o')).toBe('b-l2');
    expect(lostOnB).toEqual([]);
    await beat(a.cluster);
    expect(lostOnA).toEqual([key.sessionId]);
    expect(await admin.hget(`l2:{${key.sessionId}}:s`, 'o')).toBe('b-l2');
    await expect(a.eventStore.append(key, 2, frameOf(key, 2), false)).rejects.toMatchObject({ name: 'StreamTakenOver' });
  });

  it('the same, the instance that took the session over beating first', async () => {
    const { a, b, key } = await takenOverFromStaleA('l3');
    const lostOnA: string[] = [];
    a.cluster.onLetGo((id) => lostOnA.push(id));
    await admin.flushall();
    await beat(b.cluster);
    await beat(a.cluster);
    expect(await admin.hget(`l3:{${key.sessionId}}:s`, 'o')).toBe('b-l3');
    expect(lostOnA).toEqual([key.sessionId]);
  });

  it('a restore record the live owner saves before its records are back does not let a peer take its session (503 meanwhile, never a second owner)', async () => {
    const a = await instance('a-l4', 'l4:');
    const b = await instance('b-l4', 'l4:');
    await a.cluster.open('sess-l4', undefined);
    await a.cluster.saveRecord('sess-l4', record('a'), 60_000);
    await admin.flushall();
    // A new log level, say: the record is saved again before A's next beat.
    await a.cluster.saveRecord('sess-l4', record('a, later'), 60_000);
    await beat(b.cluster);
    await expect(b.cluster.owners!.takeOver('sess-l4', undefined)).rejects.toThrow(/Redis lost its data moments ago/);
    expect(await admin.hexists('l4:{sess-l4}:s', 'o')).toBe(0);
    await beat(a.cluster);
    expect(await b.cluster.owners!.lookupOwner('sess-l4')).toMatchObject({ instanceId: 'a-l4' });
  });
});

describe('an event store and a cluster built apart', () => {
  it('a store given its cluster is fenced as createRedisScaleOut would make it', async () => {
    const a = new RedisSessionCluster({
      url: redis.url,
      internalUrl: 'http://a-h1.internal/mcp',
      instanceId: 'a-h1',
      keyPrefix: 'h1:',
      heartbeatMs: 60_000,
    });
    const store = new RedisEventStore({ client: a.client, keyPrefix: 'h1:', cluster: a });
    const b = await instance('b-h1', 'h1:');
    try {
      await a.ready(5_000);
      const key = streamKey('h1');
      await a.open(key.sessionId, undefined);
      await a.saveRecord(key.sessionId, record('a'), 60_000);
      await store.createStream(key, [7]);
      await store.append(key, 1, frameOf(key, 1), false);
      await admin.del('h1:instance:a-h1');
      expect(await b.cluster.owners!.takeOver(key.sessionId, undefined)).toMatchObject({ record: record('a') });
      await expect(store.createStream({ sessionId: key.sessionId, streamId: 'x'.padEnd(22, '0') })).rejects.toMatchObject({
        name: 'StreamTakenOver',
      });
      await expect(store.append(key, 2, frameOf(key, 2), false)).rejects.toMatchObject({ name: 'StreamTakenOver' });
    } finally {
      await a.close();
      await store.close();
    }
  });

  it('a cluster no store was given warns at its first session, once (MCP_KIT_UNLINKED_EVENT_STORE)', async () => {
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    const alone = new RedisSessionCluster({
      url: redis.url,
      internalUrl: 'http://a-h2.internal/mcp',
      instanceId: 'a-h2',
      keyPrefix: 'h2:',
      heartbeatMs: 60_000,
    });
    try {
      await alone.ready(5_000);
      await alone.open('sess-h2', undefined);
      await alone.open('sess-h2b', undefined);
      await new Promise((resolve) => setImmediate(resolve));
      const unlinked = warnings.filter((w) => (w as Error & { code?: string }).code === 'MCP_KIT_UNLINKED_EVENT_STORE');
      expect(unlinked).toHaveLength(1);
      expect(unlinked[0]!.message).toMatch(/new RedisEventStore\(\{ cluster \}\)/);
    } finally {
      process.off('warning', onWarning);
      await alone.close();
    }
  });
});
