/**
 * Evictable state (invariant: deployment-owns-sessions). Every key mcp-kit writes carries a TTL or is bounded
 * (MAXLEN), so under an evicting `maxmemory-policy` (`volatile-lru`, `volatile-ttl`, any
 * `allkeys-*`) a full Redis may delete a live session's owner record
 * (a second instance takes the session over while its owner still serves it) or its restore
 * record (the session is gone). mcp-kit needs `noeviction`: each instance reads the policy at
 * startup and warns once (`MCP_KIT_REDIS_EVICTION`) when Redis may evict, or when it cannot tell
 * (a managed Redis that refuses INFO and CONFIG); it never refuses to start. Under `noeviction`
 * a full Redis refuses writes (the request gets 503, as in an outage) and keeps what it holds.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createRedisScaleOut, type RedisScaleOut } from '@mcp-kit/redis';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';

const servers: TestRedis[] = [];
const scaleOuts: RedisScaleOut[] = [];
const warnings: Error[] = [];
const onWarning = (warning: Error) => warnings.push(warning);

beforeAll(() => {
  process.on('warning', onWarning);
});

afterEach(async () => {
  for (const s of scaleOuts.splice(0)) {
    await s.cluster.close();
    await s.eventStore.close();
  }
});

afterAll(async () => {
  process.off('warning', onWarning);
  for (const r of servers) await r.stop();
});

async function redisWith(...args: string[]): Promise<TestRedis> {
  const r = await startRedis({ args });
  servers.push(r);
  return r;
}

async function instance(url: string, name: string): Promise<RedisScaleOut> {
  const s = createRedisScaleOut({ url, internalUrl: `http://${name}.internal/mcp`, instanceId: name });
  scaleOuts.push(s);
  await s.ready(5_000);
  // process.emitWarning delivers on the next tick.
  await new Promise((resolve) => setImmediate(resolve));
  return s;
}

const evictionWarnings = () => warnings.filter((w) => (w as Error & { code?: string }).code === 'MCP_KIT_REDIS_EVICTION');

describe('the eviction policy is checked at startup', () => {
  it('volatile-lru with a maxmemory: one warning naming the policy and the fix, however many instances start; the instance serves', async () => {
    const redis = await redisWith('--maxmemory', '64mb', '--maxmemory-policy', 'volatile-lru');
    const before = evictionWarnings().length;
    const a = await instance(redis.url, 'a1');
    const found = evictionWarnings().slice(before);
    expect(found).toHaveLength(1);
    expect(found[0]!.message).toMatch(/maxmemory-policy volatile-lru/);
    expect(found[0]!.message).toMatch(/noeviction/);
    // A second instance on the same Redis, in the same process: no second warning.
    const b = await instance(redis.url, 'b1');
    expect(evictionWarnings().length).toBe(before + 1);
    // A warning, not a refusal: sessions work.
    await a.cluster.open('sess-1', undefined);
    expect(await b.cluster.owners!.lookupOwner('sess-1')).toMatchObject({ instanceId: 'a1' });
  });

  it('noeviction: no warning; once Redis is full, writes are refused (503) and nothing it holds is evicted', async () => {
    const redis = await redisWith('--maxmemory-policy', 'noeviction');
    const before = evictionWarnings().length;
    const a = await instance(redis.url, 'a2');
    const b = await instance(redis.url, 'b2');
    expect(evictionWarnings().length).toBe(before);
    await a.cluster.open('sess-live', undefined);
    const key = { sessionId: 'sess-live', streamId: 'stream'.padEnd(22, '0') };
    await a.eventStore.createStream(key, [1]);
    // Redis is full now.
    const admin = new Redis(redis.url);
    try {
      const used = Number(/used_memory:(\d+)/.exec(await admin.info('memory'))![1]);
      await admin.config('SET', 'maxmemory', String(used - 1024));
      await expect(a.cluster.open('sess-new', undefined)).rejects.toThrow(/OOM/);
      await expect(a.eventStore.append(key, 1, 'id: x.1\ndata: {}\n\n', false)).rejects.toThrow(/OOM/);
      // What it holds stays: the live session still has its owner.
      expect(await b.cluster.owners!.lookupOwner('sess-live')).toMatchObject({ instanceId: 'a2' });
      await admin.config('SET', 'maxmemory', '0');
      await a.eventStore.append(key, 1, 'id: x.1\ndata: {}\n\n', false);
    } finally {
      admin.disconnect();
    }
  });

  it('a Redis that refuses INFO and CONFIG (a managed service): one warning that the policy could not be read, and it serves', async () => {
    const redis = await redisWith();
    const admin = new Redis(redis.url);
    await admin.call('ACL', 'SETUSER', 'app', 'on', '>app-password', '~*', '&*', '+@all', '-info', '-config');
    admin.disconnect();
    const url = redis.url.replace('redis://', 'redis://app:app-password@');
    const before = evictionWarnings().length;
    const a = await instance(url, 'a3');
    await instance(url, 'b3');
    const found = evictionWarnings().slice(before);
    expect(found).toHaveLength(1);
    expect(found[0]!.message).toMatch(/could not read .*maxmemory-policy/);
    await a.cluster.open('sess-3', undefined);
  });
});
