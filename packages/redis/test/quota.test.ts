/** RedisSessionCluster's `maxSessionsPerPrincipal` against a real redis-server: the sessions one client opens in the deployment. */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { RedisSessionCluster, whenReady } from '@mcp-kit/redis';
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

async function instance(name: string, keyPrefix: string, maxSessionsPerPrincipal?: number): Promise<RedisSessionCluster> {
  const c = new RedisSessionCluster({
    url: redis.url,
    internalUrl: `http://${name}.internal:3000/mcp`,
    instanceId: name,
    keyPrefix,
    maxSessionsPerPrincipal,
  });
  clusters.push(c);
  await whenReady(c.client, 5_000);
  return c;
}

const HOUR = 60 * 60_000;

it('counts the sessions each holder opens on any instance: past the limit, how long until it may open one; a deleted one no longer counts', async () => {
  const a = await instance('qa', 'q1:', 3);
  const b = await instance('qb', 'q1:', 3);
  expect(await a.admitSession('alice', 's1', HOUR)).toBe(0);
  expect(await b.admitSession('alice', 's2', HOUR)).toBe(0);
  expect(await a.admitSession('alice', 's3', HOUR)).toBe(0);
  // The fourth, on either instance: refused until the first of them is an hour old.
  const wait = await b.admitSession('alice', 's4', HOUR);
  expect(wait).toBeGreaterThan(HOUR - 60_000);
  expect(wait).toBeLessThanOrEqual(HOUR);
  expect(await a.admitSession('alice', 's4', HOUR)).toBeGreaterThan(0);
  // Another holder has a quota of its own.
  expect(await a.admitSession('client:10.0.0.7', 's5', HOUR)).toBe(0);
  // One deleted: room for one more.
  await b.releaseAdmission('alice', 's2');
  expect(await a.admitSession('alice', 's4', HOUR)).toBe(0);
  expect(await a.admitSession('alice', 's6', HOUR)).toBeGreaterThan(0);
  // One key per holder, each its own hash tag (every command stays in one slot of a Redis Cluster).
  const keys = (await admin.keys('q1:quota:*')).sort();
  expect(keys).toHaveLength(2);
  for (const key of keys) expect(key).toMatch(/^q1:quota:\{[\w-]{22}\}$/);
  expect(await admin.pttl(keys[0]!)).toBeGreaterThan(HOUR - 60_000);
});

it('a session older than the window no longer counts', async () => {
  const a = await instance('qc', 'q2:', 1);
  expect(await a.admitSession('bob', 's1', 200)).toBe(0);
  const wait = await a.admitSession('bob', 's2', 200);
  expect(wait).toBeGreaterThan(0);
  await new Promise((resolve) => setTimeout(resolve, wait + 20));
  expect(await a.admitSession('bob', 's2', 200)).toBe(0);
});

it('without maxSessionsPerPrincipal: every session is admitted, and nothing is written', async () => {
  const a = await instance('qd', 'q3:');
  for (let i = 0; i < 5; i++) expect(await a.admitSession('carol', `s${i}`, HOUR)).toBe(0);
  await a.releaseAdmission('carol', 's1');
  expect(await admin.keys('q3:quota:*')).toEqual([]);
  expect(() => new RedisSessionCluster({ url: redis.url, internalUrl: 'http://x.internal/mcp', maxSessionsPerPrincipal: 0 })).toThrow(
    /maxSessionsPerPrincipal/,
  );
});
