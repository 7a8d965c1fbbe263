/**
 * A shared cluster (`mode: 'shared'`, no `internalUrl`) against a real redis-server: no owner records, the
 * restore record is the session (saved with the principal of the instance that created it, kept by
 * every copy), messages between instances over pub/sub, and each stream's writer recorded.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Redis } from 'ioredis';
import type { ClusterMessage, RestoreRecord } from '@mcp-kit/core';
import { createRedisScaleOut, RedisSessionCluster, type RedisScaleOut } from '@mcp-kit/redis';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';

let redis: TestRedis;
let admin: Redis;
const clusters: RedisSessionCluster[] = [];
const scaleOuts: RedisScaleOut[] = [];

beforeAll(async () => {
  redis = await startRedis();
  admin = new Redis(redis.url);
});

afterAll(async () => {
  for (const c of clusters) await c.close();
  for (const s of scaleOuts) {
    await s.cluster.close();
    await s.eventStore.close();
  }
  admin?.disconnect();
  await redis?.stop();
});

async function shared(name: string, prefix = 'sh:'): Promise<RedisSessionCluster> {
  const c = new RedisSessionCluster({ url: redis.url, mode: 'shared', instanceId: name, heartbeatMs: 100, keyPrefix: prefix });
  clusters.push(c);
  await c.ready(5_000);
  return c;
}

const record = (level?: string): RestoreRecord => ({
  initialize: {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'c', version: '1' } },
  },
  protocolVersion: '2025-11-25',
  ...(level ? { loggingLevel: { level } } : {}),
});

describe('a shared RedisSessionCluster (no internalUrl)', () => {
  it('has no owners: open writes none, the saved record is the session for every instance', async () => {
    const a = await shared('a1');
    const b = await shared('b1');
    expect(a.shared).toBe(true);
    expect(a.internalUrl).toBe('');
    await a.open('s1', 'alice');
    expect(await admin.hexists('sh:{s1}:s', 'o')).toBe(0);
    expect(await b.copies!.restore('s1', 'alice')).toBeUndefined();
    await a.saveRecord('s1', record(), 60_000);
    expect(b.owners).toBeUndefined();
    // b gets a copy; nobody is made owner, and a still has it too.
    expect(await b.copies!.restore('s1', 'alice')).toEqual({ record: record(), principal: 'alice' });
    expect(await a.copies!.restore('s1', 'alice')).toEqual({ record: record(), principal: 'alice' });
    expect(await admin.hexists('sh:{s1}:s', 'o')).toBe(0);
    expect(await b.copies!.restore('s1', 'mallory')).toEqual({ forbidden: true });
    expect(await b.copies!.restore('s1', undefined)).toEqual({ forbidden: true });
  });

  it('a copy saving the record (a new log level) keeps the principal the creating instance saved, and creates no record that is gone', async () => {
    const a = await shared('a2');
    const b = await shared('b2');
    await a.open('s2', 'alice');
    await a.saveRecord('s2', record(), 60_000);
    await b.saveRecord('s2', record('error'), 60_000);
    expect(await a.copies!.restore('s2', 'alice')).toEqual({ record: record('error'), principal: 'alice' });
    // A record deleted meanwhile (its client's DELETE) is not brought back by a copy, with no principal.
    await b.saveRecord('never-created', record('error'), 60_000);
    expect(await admin.exists('sh:{never-created}:s')).toBe(0);
  });

  it('post reaches the instance named (or every other one holding a copy with *), never its sender', async () => {
    const a = await shared('a3');
    const b = await shared('b3');
    const c = await shared('c3');
    const d = await shared('d3');
    // A message is about a session: it goes to the instances holding a copy of it (a, b, c), not to d.
    await a.open('s3', undefined);
    await a.saveRecord('s3', record(), 60_000);
    await b.copies!.restore('s3', undefined);
    await c.copies!.restore('s3', undefined);
    const got: Record<string, ClusterMessage[]> = { a: [], b: [], c: [], d: [] };
    for (const [name, instance] of Object.entries({ a, b, c, d })) instance.copies!.onMessage((m) => got[name]!.push(m));
    const answer: ClusterMessage = { kind: 'answer', sessionId: 's3', message: { jsonrpc: '2.0', id: 'b3~x~0', result: {} } };
    await a.copies!.post('b3', answer);
    const ended: ClusterMessage = { kind: 'ended', sessionId: 's3' };
    await a.copies!.post('*', ended);
    // Kept until read: whether or not the subscriptions were in place, each arrives once.
    await vi.waitFor(() => expect(got.b).toEqual([answer, ended]));
    await vi.waitFor(() => expect(got.c).toEqual([ended]));
    expect(got.a).toEqual([]);
    expect(got.d).toEqual([]);
  });

  it('posts are kept until read: every one reaches its instance once and in order while its subscriber connection keeps dropping', async () => {
    const a = await shared('a7', 'sk:');
    const b = await shared('b7', 'sk:');
    await a.open('s7', undefined);
    await a.saveRecord('s7', record(), 60_000);
    await b.copies!.restore('s7', undefined);
    const got: number[] = [];
    b.copies!.onMessage((m) => {
      if (m.kind === 'answer' && 'result' in m.message) got.push((m.message.result as { n: number }).n);
    });
    const posts: Promise<void>[] = [];
    for (let n = 0; n < 300; n++) {
      const message: ClusterMessage = { kind: 'answer', sessionId: 's7', message: { jsonrpc: '2.0', id: 'x', result: { n } } };
      // Every 50 posts b's subscriber is cut (it reconnects by itself): what was published meanwhile is read back.
      if (n % 50 === 25) await admin.client('KILL', 'TYPE', 'pubsub');
      posts.push(a.copies!.post(n % 2 === 0 ? 'b7' : '*', message));
      if (n % 10 === 0) await new Promise((r) => setTimeout(r, 5));
    }
    await Promise.all(posts);
    // The session's inbox is read in order: once the last one arrived, every one before it had, once.
    await vi.waitFor(() => expect(got.at(-1)).toBe(299), { timeout: 5_000 });
    expect(got).toEqual(Array.from({ length: 300 }, (_, n) => n));
  });

  it('a post made the moment an instance starts to listen, before its subscriber is connected, reaches it', async () => {
    const a = await shared('a9', 'sl:');
    const b = await shared('b9', 'sl:');
    await a.open('s9', undefined);
    await a.saveRecord('s9', record(), 60_000);
    await b.copies!.restore('s9', undefined);
    const heard: ClusterMessage[] = [];
    b.copies!.onMessage((m) => heard.push(m));
    const ended: ClusterMessage = { kind: 'ended', sessionId: 's9' };
    await a.copies!.post('*', ended);
    await vi.waitFor(() => expect(heard).toEqual([ended]), { timeout: 3_000 });
  });

  it('two copies changing the subscriptions at once both keep their change; an unsubscribe takes one out; a deleted record stays deleted', async () => {
    const a = await shared('a8', 'sm:');
    const b = await shared('b8', 'sm:');
    await a.open('s8', 'alice');
    await a.saveRecord('s8', record(), 60_000);
    await b.copies!.restore('s8', 'alice');
    const subscribe = (uri: string) => ({ method: 'resources/subscribe', params: { uri } });
    // Each copy's own view holds only its own subscription: saved whole, one would replace the other.
    const view = (uri: string): RestoreRecord => ({ ...record(), subscriptions: [{ uri }] });
    await Promise.all([
      ...Array.from({ length: 10 }, (_, i) => a.saveRecord('s8', view(`test://a${i}`), 60_000, subscribe(`test://a${i}`))),
      ...Array.from({ length: 10 }, (_, i) => b.saveRecord('s8', view(`test://b${i}`), 60_000, subscribe(`test://b${i}`))),
      b.saveRecord('s8', record('error'), 60_000, { method: 'logging/setLevel', params: { level: 'error' } }),
    ]);
    const saved = async () => {
      const [r, p] = await admin.hmget('sm:{s8}:s', 'r', 'p');
      return { p, r: JSON.parse(r!) as { s?: Array<{ uri: string }>; l?: unknown } };
    };
    const uris = async () => ((await saved()).r.s ?? []).map((s) => s.uri).sort();
    expect(await uris()).toEqual(
      [...Array.from({ length: 10 }, (_, i) => `test://a${i}`), ...Array.from({ length: 10 }, (_, i) => `test://b${i}`)].sort(),
    );
    expect((await saved()).p).toBe('alice');
    expect((await saved()).r.l).toEqual({ level: 'error' });
    await a.saveRecord('s8', record(), 60_000, { method: 'resources/unsubscribe', params: { uri: 'test://b3' } });
    expect(await uris()).not.toContain('test://b3');
    expect((await uris()).length).toBe(19);
    await a.end('s8');
    await b.saveRecord('s8', view('test://late'), 60_000, subscribe('test://late'));
    expect(await admin.hexists('sm:{s8}:s', 'r')).toBe(0);
  });

  it("release (the client's DELETE) deletes the record and tells every instance holding a copy", async () => {
    const a = await shared('a4');
    const b = await shared('b4');
    await a.open('s4', undefined);
    await a.saveRecord('s4', record(), 60_000);
    await b.copies!.restore('s4', undefined);
    const heard = new Promise<ClusterMessage>((resolve) => b.copies!.onMessage(resolve));
    // b listens once Redis counts its subscription to the session's channel.
    while (((await admin.pubsub('NUMSUB', 'sh:{s4}:bus')) as [string, number])[1] === 0) await new Promise((r) => setImmediate(r));
    expect(await a.end('s4')).toBe(true);
    expect(await admin.hexists('sh:{s4}:s', 'r')).toBe(0);
    expect(await b.copies!.restore('s4', undefined)).toBeUndefined();
    expect(await heard).toEqual({ kind: 'ended', sessionId: 's4' });
  });

  it("createRedisScaleOut with mode: 'shared': the event store records the writer of each request stream and no fence", async () => {
    const one = createRedisScaleOut({ url: redis.url, mode: 'shared', keyPrefix: 'sw:', instanceId: 'w1', heartbeatMs: 100 });
    scaleOuts.push(one);
    await one.ready(5_000);
    const key = { sessionId: 's5', streamId: 'stream-5' };
    await one.eventStore.createStream(key, [7]);
    expect(await one.eventStore.writer(key)).toEqual({ instanceId: 'w1', lastSeq: 0, complete: false, requestIds: [7] });
    await one.eventStore.append(key, 1, 'id: stream-5.1\ndata: {}\n\n', false);
    // No owner record exists in a shared cluster: a fence would refuse nothing, and none is set.
    await one.eventStore.append(key, 2, 'id: stream-5.2\ndata: {"id":7}\n\n', true);
    expect(await one.eventStore.writer(key)).toEqual({ instanceId: 'w1', lastSeq: 2, complete: true, requestIds: [7] });
    expect(await one.eventStore.writer({ sessionId: 's5', streamId: 'nope' })).toBeUndefined();
  });

  it('Redis restarted empty: an instance that holds a copy writes its record back at its next beat; meanwhile a session with no record is a 503, not a 404', async () => {
    const a = await shared('a6', 'sr:');
    const b = await shared('b6', 'sr:');
    await a.open('s6', 'alice');
    await a.saveRecord('s6', record('error'), 60_000);
    await admin.flushall();
    // Within the next beats (100 ms each) b may say "unknown yet" (a rejection: 503), never "gone".
    const deadline = Date.now() + 5_000;
    let restored: Awaited<ReturnType<NonNullable<RedisSessionCluster['copies']>['restore']>>;
    let saidGone = 0;
    let saidWait = 0;
    for (;;) {
      restored = await b.copies!.restore('s6', 'alice').then(
        (found) => {
          if (!found) saidGone++;
          return found;
        },
        (error: Error) => {
          expect(error.message).toMatch(/Redis lost its data moments ago/);
          saidWait++;
          return undefined;
        },
      );
      if (restored || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(restored).toEqual({ record: record('error'), principal: 'alice' });
    expect(saidGone).toBe(0);
    expect(saidWait).toBeGreaterThan(0);
  });

  it('an empty internalUrl is refused with a message naming both choices', () => {
    expect(() => new RedisSessionCluster({ url: redis.url, internalUrl: '' })).toThrow(
      /`internalUrl` is empty: give .*or `mode: 'shared'`/,
    );
  });
});
