/**
 * `initialize` while Redis fails (invariant: stored-before-success), in a forwarding and in a shared cluster of two
 * express-example instances, A and B. Nothing answers success before its Redis write is done: a
 * session id goes to the client only once the session's record is in Redis (the owner record in a
 * forwarding cluster, the restore record every copy is made from in a shared one), so that B
 * serves the session the client just got. Otherwise the client gets 503 with a JSON-RPC error and
 * no Mcp-Session-Id, and A keeps nothing of the session it could not record.
 */
import { createServer } from 'node:http';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMcpHandler } from '@mcp-kit/core';
import { mcpExpress } from '@mcp-kit/express';
import { createFixtureServer } from '@mcp-kit/fixtures';
import { createRedisScaleOut } from '@mcp-kit/redis';
import { instance, type Instance } from '@mcp-kit/testbed/cluster';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';
import { freePort } from '@mcp-kit/testbed/processes';
import { redisCommand } from '@mcp-kit/testbed/redis-command';
import { http, openSession, SseStream } from '@mcp-kit/testbed/fetch-client';
import { initializeRequest } from '@mcp-kit/testbed/requests';

/**
 * ACL key patterns under which every key but a session's hash (`mcp-kit:{<id>}:s`: its record and
 * owner) is written as before, and that hash is read-only: the deployment-wide keys, the
 * instances' index, and a session's other keys (a suffix of two characters or more).
 */
const SESSIONS_READ_ONLY = ['~mcp-kit:[^{]*', '~mcp-kit:{instances}*', '~mcp-kit:{*}:??*', '%R~mcp-kit:{*}:s'];

const ENV = { HEARTBEAT_MS: '1000', RETRY_MS: '100' };

/** The sessions A opened since `since` (by the live feed's clock, the same machine's), and how many of them are still open. */
interface SessionCounts {
  opened: number;
  open: number;
}

/**
 * Follows A's live feed (/mcp-kit/live/events: its history, then live) until `done` holds for the
 * sessions opened at or after `since`; rejects after `timeoutMs`. Sessions opened earlier are left
 * out by their ids, so one that an earlier case opened and A ends meanwhile (Redis came back
 * empty) does not count.
 */
async function sessionsSince(
  instanceUrl: string,
  since: number,
  done: (counts: SessionCounts) => boolean,
  timeoutMs = 10_000,
): Promise<SessionCounts> {
  const controller = new AbortController();
  const response = await fetch(new URL('/mcp-kit/live/events', instanceUrl), { signal: controller.signal });
  const feed = new SseStream(response, controller);
  const open = new Set<string>();
  let opened = 0;
  try {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const left = deadline - Date.now();
      const block = await feed.next(Math.max(left, 1)).catch((error: Error) => {
        throw new Error(
          `live feed: ${opened} sessions opened, ${open.size} still open after ${timeoutMs} ms (${error.message.slice(0, 80)})`,
        );
      });
      if (!block.data) continue;
      const { items } = JSON.parse(block.data) as { items: Array<{ type: string; at: number; session?: string }> };
      for (const item of items) {
        if (item.type === 'session.open' && item.at >= since) {
          opened++;
          open.add(item.session!);
        } else if (item.type === 'session.close') open.delete(item.session!);
      }
      const counts = { opened, open: open.size };
      if (done(counts)) return counts;
    }
  } finally {
    feed.abort();
  }
}

/** A's answer to an initialize it could not record: 503, a JSON-RPC error, and no session. */
async function expectRefused(init: Response): Promise<void> {
  // Checked before the body is read: an SSE answer would keep it open as long as the stream lasts.
  expect({ status: init.status, sessionId: init.headers.get('mcp-session-id') }).toEqual({ status: 503, sessionId: null });
  const body = await init.text();
  expect(init.headers.get('retry-after')).toBe('1');
  expect(JSON.parse(body)).toMatchObject({ jsonrpc: '2.0', error: { code: -32000, message: expect.stringMatching(/unavailable/) } });
}

for (const mode of ['forward', 'shared'] as const) {
  describe(`${mode === 'forward' ? 'forwarding' : 'shared'} cluster`, () => {
    let redis: TestRedis;
    let a: Instance;
    let b: Instance;

    beforeAll(async () => {
      redis = await startRedis();
      a = instance('A', await freePort(), { ...ENV, CLUSTER: mode, REDIS_URL: redis.url });
      b = instance('B', await freePort(), { ...ENV, CLUSTER: mode, REDIS_URL: redis.url, LIVE_PAGE: '0' });
      await Promise.all([a.start(), b.start()]);
    }, 30_000);

    afterAll(async () => {
      await a?.stop('SIGKILL');
      await b?.stop('SIGKILL');
      await redis?.stop();
    });

    /** What the session's hash holds that Redis is made to refuse: its owner (forwarding) or its record (shared). */
    const recordKind = mode === 'forward' ? 'owner' : 'restore';

    it(`initialize while Redis refuses to write the session's ${recordKind} record: 503, no session id, nothing left on A`, async () => {
      // Everything else is written as before (heartbeats, streams): only the session's hash is
      // refused, as Redis answers a write it cannot take (NOPERM, OOM, READONLY).
      await redisCommand(redis.port, 'ACL', 'SETUSER', 'default', 'resetkeys', ...SESSIONS_READ_ONLY);
      let init: Response;
      const since = Date.now();
      try {
        init = await http(a.url).post(initializeRequest(1));
        await expectRefused(init);
      } finally {
        await redisCommand(redis.port, 'ACL', 'SETUSER', 'default', 'resetkeys', '~*');
      }
      // A opened a session for it and ended it: none is left open there.
      expect(await sessionsSince(a.url, since, (c) => c.opened >= 1 && c.open === 0)).toEqual({ opened: 1, open: 0 });

      // Redis takes the record again: the next initialize gets a session B serves.
      const { headers } = await openSession(http(a.url));
      const listed = await http(b.url).post({ jsonrpc: '2.0', id: 2, method: 'tools/list' }, headers);
      expect(listed.status, await listed.text()).toBe(200);
    }, 30_000);

    it('initialize while Redis is down: 503, no session id, nothing left on A; once Redis is back, a session B serves', async () => {
      const since = Date.now();
      await redis.stop();
      try {
        await expectRefused(await http(a.url).post(initializeRequest(1)));
      } finally {
        await redis.start();
      }
      // A opened a session for it and ended it. Counted by id: the session the case above opened
      // may end too, now that Redis came back without its record, and is no concern here.
      expect(await sessionsSince(a.url, since, (c) => c.opened >= 1 && c.open === 0)).toEqual({ opened: 1, open: 0 });

      // Redis restarted empty: a new session, recorded, that B serves once both instances are back.
      let served = 0;
      const deadline = Date.now() + 15_000;
      while (served !== 200 && Date.now() < deadline) {
        const init = await http(a.url).post(initializeRequest(1));
        const sessionId = init.headers.get('mcp-session-id');
        await init.text();
        if (init.status !== 200 || !sessionId) {
          // A is still reconnecting to Redis (503): the client comes back, as Retry-After says.
          expect(init.status).toBe(503);
          await new Promise((resolve) => setTimeout(resolve, 100));
          continue;
        }
        const headers = { 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' };
        await (await http(a.url).post({ jsonrpc: '2.0', method: 'notifications/initialized' }, headers)).text();
        const listed = await http(b.url).post({ jsonrpc: '2.0', id: 2, method: 'tools/list' }, headers);
        await listed.text();
        served = listed.status;
        // Never a session id that B does not know: B may only be unreachable for now (503).
        expect([200, 503]).toContain(served);
      }
      expect(served).toBe(200);
    }, 30_000);
  });
}

describe('shared cluster answering with JSON bodies (jsonResponse, in process)', () => {
  it('initialize while Redis refuses to write the restore record: 503, no session id, no session kept', async () => {
    const redis = await startRedis();
    const port = await freePort();
    const scaleOut = createRedisScaleOut({ url: redis.url });
    const errors: string[] = [];
    const handler = createMcpHandler({
      server: () => createFixtureServer(),
      jsonResponse: true,
      eventStore: scaleOut.eventStore,
      cluster: scaleOut.cluster,
      taskStore: scaleOut.taskStore,
      onError: (error) => errors.push(error.message),
    });
    const server = createServer(express().use('/mcp', mcpExpress(handler)));
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${port}/mcp`;
    try {
      await scaleOut.ready();
      await redisCommand(redis.port, 'ACL', 'SETUSER', 'default', 'resetkeys', ...SESSIONS_READ_ONLY);
      try {
        await expectRefused(await http(url).post(initializeRequest(1)));
      } finally {
        await redisCommand(redis.port, 'ACL', 'SETUSER', 'default', 'resetkeys', '~*');
      }
      expect(handler.sessionCount).toBe(0);
      expect(errors.some((e) => /saveRecord failed/.test(e) && /NOPERM/.test(e))).toBe(true);

      const init = await http(url).post(initializeRequest(2));
      expect(init.headers.get('content-type')).toMatch(/^application\/json/);
      expect(await init.json()).toMatchObject({ id: 2, result: { protocolVersion: '2025-11-25' } });
      const sessionId = init.headers.get('mcp-session-id')!;
      expect(await redisCommand(redis.port, 'HEXISTS', `mcp-kit:{${sessionId}}:s`, 'r')).toBe(1);
      expect(handler.sessionCount).toBe(1);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await handler.close();
      await redis.stop();
    }
  }, 30_000);
});
