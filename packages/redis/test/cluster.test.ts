/** RedisSessionCluster against a real redis-server: ownership, liveness, release and recovery. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createRedisScaleOut, RedisSessionCluster, whenReady } from '@mcp-kit/redis';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';

let redis: TestRedis;
let admin: Redis;
const clusters: RedisSessionCluster[] = [];

beforeAll(async () => {
  redis = await startRedis();
  admin = new Redis(redis.url);
});

afterAll(async () => {
  for (const c of clusters) await c.close();
  admin?.disconnect();
  await redis?.stop();
});

async function instance(name: string, heartbeatMs = 100): Promise<RedisSessionCluster> {
  const c = new RedisSessionCluster({
    url: redis.url,
    internalUrl: `http://${name}.internal:3000/mcp`,
    instanceId: name,
    heartbeatMs,
    keyPrefix: `t${heartbeatMs}:`,
  });
  clusters.push(c);
  await whenReady(c.client, 5_000);
  return c;
}

async function eventually(check: () => Promise<void>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

describe('RedisSessionCluster', () => {
  it('an instance that claimed a session is its owner for the others, with its URL and principal; itself sees a stale record as self', async () => {
    const a = await instance('a1');
    const b = await instance('b1');
    await a.open('sess-1', 'client\u0000sub');
    expect(await b.owners!.lookupOwner('sess-1')).toEqual({
      instanceId: 'a1',
      self: false,
      principal: 'client\u0000sub',
      address: 'http://a1.internal:3000/mcp',
    });
    expect(await a.owners!.lookupOwner('sess-1')).toMatchObject({ instanceId: 'a1', self: true });
    expect(await b.owners!.lookupOwner('never-claimed')).toBeUndefined();
    // The owner is part of the session (a hash under its hash tag), which lives ownerTtlMs until its
    // record is saved (then as long as the session); the instance key lives 3 heartbeats.
    expect(await admin.hmget('t100:{sess-1}:s', 'o', 'u', 'p')).toEqual(['a1', 'http://a1.internal:3000/mcp', 'client\u0000sub']);
    expect(await admin.pttl('t100:{sess-1}:s')).toBeGreaterThan(23 * 60 * 60_000);
    expect(await admin.pttl('t100:instance:a1')).toBeLessThanOrEqual(300);
  });

  it('touch marks a session as followed from another instance for 3 owner checks; activeElsewhere sees it', async () => {
    const a = await instance('a7');
    const b = await instance('b7');
    await a.open('sess-7', undefined);
    expect(await a.activeElsewhere('sess-7')).toBe(false);
    await b.touch('sess-7');
    expect(await a.activeElsewhere('sess-7')).toBe(true);
    const ttl = await admin.pttl('t100:{sess-7}:seen');
    expect(ttl).toBeGreaterThan(b.writerCheckMs * 2);
    expect(ttl).toBeLessThanOrEqual(b.writerCheckMs * 3);
  });

  it('release forgets the owner: the session is gone for everyone', async () => {
    const a = await instance('a2');
    const b = await instance('b2');
    await a.open('sess-2', undefined);
    await a.end('sess-2');
    expect(await b.owners!.lookupOwner('sess-2')).toBeUndefined();
    expect(await admin.hexists('t100:{sess-2}:s', 'o')).toBe(0);
  });

  it('an instance that stops beating is gone after 3 heartbeats: its sessions have no owner', async () => {
    const a = await instance('a3');
    const b = await instance('b3');
    await a.open('sess-3', undefined);
    expect(await b.owners!.lookupOwner('sess-3')).toMatchObject({ instanceId: 'a3' });
    // A crash: the heartbeat stops, nothing is cleaned up.
    const { registry } = a as unknown as { registry: { timer: NodeJS.Timeout } };
    clearInterval(registry.timer);
    await eventually(async () => expect(await b.owners!.lookupOwner('sess-3')).toBeUndefined());
  });

  it('a stale owner takes nothing back: its beat lets go of a session a peer took over, and its release deletes nothing of the peer', async () => {
    const a = await instance('a-stale');
    const b = await instance('b-fresh');
    await a.open('sess-fenced', undefined);
    await a.saveRecord('sess-fenced', { initialize: { jsonrpc: '2.0', id: 1, method: 'initialize' } }, 60_000);
    await a.open('sess-kept', undefined);
    const lost: string[] = [];
    a.onLetGo((id) => lost.push(id));
    // A was away past its window (its instance key expired); B took one of its sessions over.
    // (What B's takeOver writes, in one step with A's key expiring, so A's own beat cannot come between.)
    await admin
      .multi()
      .del('t100:instance:a-stale')
      .hset('t100:{sess-fenced}:s', 'o', 'b-fresh', 'u', 'http://b-fresh.internal:3000/mcp')
      .exec();
    // A's next beat writes back the session it still owns, and lets go of the other.
    await eventually(async () => expect(lost).toEqual(['sess-fenced']));
    expect(await b.owners!.lookupOwner('sess-fenced')).toMatchObject({ instanceId: 'b-fresh', self: true });
    expect(await b.owners!.lookupOwner('sess-kept')).toMatchObject({ instanceId: 'a-stale' });
    // Its release (an idle expiry, a DELETE it was still holding) is refused: B's records stand.
    expect(await a.end('sess-fenced')).toBe(false);
    expect(await b.owners!.lookupOwner('sess-fenced')).toMatchObject({ instanceId: 'b-fresh', self: true });
    expect(await admin.hexists('t100:{sess-fenced}:s', 'r')).toBe(1);
    expect(await a.end('sess-kept')).toBe(true);
    expect(await b.owners!.lookupOwner('sess-kept')).toBeUndefined();
  });

  it("a stale owner's writes are refused: its events in the session and its restore record", async () => {
    const scaleA = createRedisScaleOut({
      url: redis.url,
      internalUrl: 'http://a-fence.internal/mcp',
      instanceId: 'a-fence',
      keyPrefix: 'fence:',
    });
    const scaleB = createRedisScaleOut({
      url: redis.url,
      internalUrl: 'http://b-fence.internal/mcp',
      instanceId: 'b-fence',
      keyPrefix: 'fence:',
    });
    try {
      await Promise.all([scaleA.ready(5_000), scaleB.ready(5_000)]);
      const key = { sessionId: 'sess-writes', streamId: 'stream-writes'.padEnd(22, '0') };
      const frameOf = (seq: number) => `id: ${key.streamId}.${seq}\ndata: {}\n\n`;
      await scaleA.cluster.open(key.sessionId, undefined);
      const initialize = { jsonrpc: '2.0' as const, id: 1, method: 'initialize' as const, params: { clientInfo: { name: 'a' } } };
      await scaleA.cluster.saveRecord(key.sessionId, { initialize }, 60_000);
      await scaleA.eventStore.createStream(key);
      await scaleA.eventStore.append(key, 1, frameOf(1), false);
      // B takes the session over (as after A was away past its window: its instance key expired).
      await admin.del('fence:instance:a-fence');
      expect(await scaleB.cluster.owners!.takeOver(key.sessionId, undefined)).toMatchObject({ record: { initialize } });
      await scaleB.cluster.saveRecord(key.sessionId, { initialize: { ...initialize, params: { clientInfo: { name: 'b' } } } }, 60_000);
      await expect(scaleA.eventStore.append(key, 2, frameOf(2), false)).rejects.toThrow(/another instance owns this session now/);
      await scaleB.eventStore.append(key, 2, frameOf(2), true);
      await scaleA.cluster.saveRecord(key.sessionId, { initialize }, 60_000);
      expect(JSON.parse((await admin.hget('fence:{sess-writes}:s', 'r'))!).a.clientInfo.name).toBe('b');
      expect(await scaleB.eventStore.replayAfter(key.sessionId, key.streamId, 0)).toMatchObject({ ok: true, lastSeq: 2, complete: true });
    } finally {
      await scaleA.cluster.close();
      await scaleB.cluster.close();
      await scaleA.eventStore.close();
      await scaleB.eventStore.close();
    }
  });

  it('close() gives up every session at once', async () => {
    const a = await instance('a4');
    const b = await instance('b4');
    await a.open('sess-4a', undefined);
    await a.open('sess-4b', undefined);
    await a.close();
    expect(await b.owners!.lookupOwner('sess-4a')).toBeUndefined();
    expect(await b.owners!.lookupOwner('sess-4b')).toBeUndefined();
  });

  it('after Redis lost everything (restart without persistence), the next heartbeat writes the live sessions again', async () => {
    const a = await instance('a5');
    const b = await instance('b5');
    await a.open('sess-5', 'p');
    await admin.flushall();
    expect(await b.owners!.lookupOwner('sess-5')).toBeUndefined();
    await eventually(async () => expect(await b.owners!.lookupOwner('sess-5')).toMatchObject({ instanceId: 'a5', principal: 'p' }));
  });

  it('a claim that finds its instance key gone also brings the earlier sessions back', { timeout: 20_000 }, async () => {
    const a = await instance('a6', 60_000); // no heartbeat during the test
    const b = await instance('b6', 60_000);
    await a.open('sess-6a', undefined);
    await admin.flushall();
    await a.open('sess-6b', undefined);
    // Well inside the next heartbeat (60 s); it takes ~0.1 s. The instance's first beat may still
    // be under way here, and Redis may have lost its data in the middle of it: that beat wrote no
    // record back and let sess-6a go (it read no generation, so took the missing record for one
    // ended on purpose), in about half of the runs of this file before.
    await eventually(async () => expect(await b.owners!.lookupOwner('sess-6a')).toMatchObject({ instanceId: 'a6' }), 10_000);
  });

  it('an instance is alive for the others as soon as ready() resolves, though its next heartbeat is a minute away', async () => {
    const b = await instance('b7', 60_000);
    const a = new RedisSessionCluster({
      url: redis.url,
      internalUrl: 'http://a7.internal:3000/mcp',
      instanceId: 'a7',
      heartbeatMs: 60_000,
      keyPrefix: 't60000:',
    });
    clusters.push(a);
    await a.ready(5_000);
    expect(await b.instanceAlive('a7')).toBe(true);
  });

  it('after a reconnect the instance beats at once, not a heartbeat later', async () => {
    const a = await instance('a8', 60_000);
    const b = await instance('b8', 60_000);
    await admin.del('t60000:instance:a8');
    expect(await b.instanceAlive('a8')).toBe(false);
    a.client.disconnect(true);
    await eventually(async () => expect(await admin.exists('t60000:instance:a8')).toBe(1));
  });
});
