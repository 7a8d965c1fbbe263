/**
 * A client's DELETE while Redis fails (invariant: stored-before-success), in a forwarding and in a shared cluster
 * of two express-example instances, A and B. Nothing answers success before its Redis write is
 * done: the DELETE is answered 200 only once the cluster-wide end went through (owner record
 * released, restore record deleted, the other instances told), and 503 with a JSON-RPC error
 * otherwise. Either way the session it ended never comes back as a live session: once Redis
 * behaves, A finishes the end it could not write, and both instances answer 404 for the session,
 * B's copy (shared) included.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { instance, type Instance } from '@mcp-kit/testbed/cluster';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';
import { freePort } from '@mcp-kit/testbed/processes';
import { redisCommand } from '@mcp-kit/testbed/redis-command';
import { startRespFaultProxy, type RespFaultProxy } from '@mcp-kit/testbed/resp-faults';
import { http, openSession } from '@mcp-kit/testbed/fetch-client';

const ENV = { HEARTBEAT_MS: '1000', RETRY_MS: '100', LIVE_PAGE: '0' };

/** What each test started, stopped in reverse order after it. */
const started: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const stop of started.splice(0).reverse()) await stop();
});

interface Setup {
  redis: TestRedis;
  /** A reaches Redis through it. */
  faults: RespFaultProxy;
  a: Instance;
  b: Instance;
}

/** Redis (with an append-only file: a restart keeps what was written), A behind a fault proxy, B straight on Redis. */
async function setUp(mode: 'forward' | 'shared'): Promise<Setup> {
  const dir = mkdtempSync(join(tmpdir(), 'mcp-kit-delete-'));
  started.push(async () => rmSync(dir, { recursive: true, force: true }));
  const redis = await startRedis({ aofDir: dir });
  started.push(() => redis.stop());
  const faults = await startRespFaultProxy(redis.port);
  started.push(() => faults.close());
  const a = instance('A', await freePort(), { ...ENV, CLUSTER: mode, REDIS_URL: faults.url });
  const b = instance('B', await freePort(), { ...ENV, CLUSTER: mode, REDIS_URL: redis.url });
  started.push(
    () => a.stop('SIGKILL'),
    () => b.stop('SIGKILL'),
  );
  await Promise.all([a.start(), b.start()]);
  return { redis, faults, a, b };
}

let nextId = 10;
/** `tools/list` in the session on `url`: its status (the body is read to the end). */
async function toolsList(url: string, headers: Record<string, string>): Promise<number> {
  const response = await http(url).post({ jsonrpc: '2.0', id: nextId++, method: 'tools/list' }, headers);
  await response.text();
  return response.status;
}

/** Resolves once `check` holds, asking again every 50 ms; rejects with `what` after `timeoutMs`. */
async function eventually(what: string, check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`still not ${what} after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The session's owner and record are gone from Redis (fields of its hash): its end went through. */
async function recordsGone(redis: TestRedis, sessionId: string): Promise<boolean> {
  const [owner, record] = (await redisCommand(redis.port, 'HMGET', `mcp-kit:{${sessionId}}:s`, 'o', 'r')) as Array<string | null>;
  return owner === null && record === null;
}

/** A's DELETE, answered 503 with a JSON-RPC error the client can retry on. */
async function expectUnavailable(deleted: Response): Promise<void> {
  const body = await deleted.text();
  expect(deleted.status, body).toBe(503);
  expect(deleted.headers.get('retry-after')).toBe('1');
  expect(deleted.headers.get('content-type')).toMatch(/^application\/json/);
  expect(JSON.parse(body)).toMatchObject({ jsonrpc: '2.0', error: { code: -32000, message: expect.stringMatching(/unavailable/) } });
}

for (const mode of ['forward', 'shared'] as const) {
  describe(`${mode === 'forward' ? 'forwarding' : 'shared'} cluster`, () => {
    it('a DELETE whose Redis commands fail is answered 503, and the session never serves again, on A or on B', async () => {
      const { redis, faults, a, b } = await setUp(mode);
      const { sessionId, headers } = await openSession(http(a.url));
      // B serves it too: forwarded to A (forwarding), or from a copy of its own (shared).
      expect(await toolsList(b.url, headers)).toBe(200);

      faults.failRate = 1;
      const deleted = await http(a.url).del(headers);
      faults.failRate = 0;
      await expectUnavailable(deleted);

      // A ended the session for its client: nothing of it serves there, whatever Redis still holds.
      expect(await toolsList(a.url, headers)).toBe(404);
      // Forwarding: B still finds A named as the owner and forwards there, where the session is gone.
      if (mode === 'forward') expect(await toolsList(b.url, headers)).toBe(404);
      // Redis behaves again: A writes the end it owed, and B lets its copy go (shared).
      await eventually('released in Redis', () => recordsGone(redis, sessionId));
      await eventually('404 on B', async () => (await toolsList(b.url, headers)) === 404);
      expect(await toolsList(a.url, headers)).toBe(404);
      // The client's DELETE sent again: the session is gone (200 while A still drops its events).
      expect([200, 404]).toContain((await http(a.url).del(headers)).status);
    }, 60_000);

    it('a DELETE while Redis is down is answered 503; once Redis is back (with its data), the session is gone everywhere', async () => {
      const { redis, a, b } = await setUp(mode);
      const { sessionId, headers } = await openSession(http(a.url));
      expect(await toolsList(b.url, headers)).toBe(200);

      await redis.stop();
      await expectUnavailable(await http(a.url).del(headers));
      // Gone on A at once (shared too: A's copy ends without waiting for Redis to be asked).
      expect(await toolsList(a.url, headers)).toBe(404);
      await redis.start();

      // Nobody sends the DELETE again: A owes Redis the end, and writes it once Redis is back.
      await eventually('released in Redis', () => recordsGone(redis, sessionId));
      await eventually('404 on B', async () => (await toolsList(b.url, headers)) === 404);
      expect(await toolsList(a.url, headers)).toBe(404);
      // The client's DELETE sent again, as Retry-After says: the session is gone (200 while A still
      // drops its events, the last part of the end it owed; 404 after).
      expect([200, 404]).toContain((await http(a.url).del(headers)).status);
    }, 60_000);

    it('a DELETE sent again after a 503 is answered 200 once Redis takes the end', async () => {
      const { redis, faults, a } = await setUp(mode);
      const { sessionId, headers } = await openSession(http(a.url));
      faults.failRate = 1;
      await expectUnavailable(await http(a.url).del(headers));
      // Still failing: the DELETE sent again is answered 503 too.
      await expectUnavailable(await http(a.url).del(headers));
      faults.failRate = 0;
      // A's own next try may come first (404 then: nothing left to delete); otherwise this one ends it.
      expect([200, 404]).toContain((await http(a.url).del(headers)).status);
      await eventually('released in Redis', () => recordsGone(redis, sessionId));
    }, 60_000);

    it('a DELETE that Redis takes is answered 200 once the records are gone', async () => {
      const { redis, a, b } = await setUp(mode);
      const { sessionId, headers } = await openSession(http(a.url));
      expect(await toolsList(b.url, headers)).toBe(200);
      const deleted = await http(a.url).del(headers);
      expect(deleted.status, await deleted.text()).toBe(200);
      // Written before the answer, not after it.
      expect(await recordsGone(redis, sessionId)).toBe(true);
      await eventually('404 on B', async () => (await toolsList(b.url, headers)) === 404);
    }, 60_000);
  });
}
