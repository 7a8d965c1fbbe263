/**
 * A shared cluster: `resources/subscribe` through two copies of one session, at
 * once or while one copy has not heard the other's yet (its bus connection half-open, not noticed
 * yet), must both stay in the session's record in Redis, which any instance restores the session
 * from: a copy that saved its own view of the record whole would drop, with the later save, the
 * subscription the other copy had just added. B reaches Redis through a fault proxy that can
 * black-hole its bus subscriber's connection.
 */
import { afterEach, expect, it } from 'vitest';
import { instance } from '@mcp-kit/testbed/cluster';
import { redisCommand } from '@mcp-kit/testbed/redis-command';
import { startRedis } from '@mcp-kit/testbed/redis';
import { freePort } from '@mcp-kit/testbed/processes';
import { startRespFaultProxy } from '@mcp-kit/testbed/resp-faults';
import { http } from '@mcp-kit/testbed/fetch-client';
import { initializeRequest, LEGACY } from '@mcp-kit/testbed/requests';

const ENV = { CLUSTER: 'shared', HEARTBEAT_MS: '300', RETRY_MS: '100', LIVE_PAGE: '0' };
/** A session's bus channel: `mcp-kit:{<session id>}:bus`. */
const BUS = /mcp-kit:\{[^}]*\}:bus/;

/** What each test started, stopped in reverse order after it. */
const started: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const stop of started.splice(0).reverse()) await stop();
});

/** A session initialized on `on`, `notifications/initialized` through `then` (which makes its copy there). */
async function session(on: string, then: string): Promise<Record<string, string>> {
  const init = await http(on).postSse(initializeRequest(1));
  const sessionId = init.response.headers.get('mcp-session-id')!;
  await init.until((m) => m.id === 1);
  await init.ended_();
  const headers = { 'mcp-session-id': sessionId, 'mcp-protocol-version': LEGACY };
  const ack = await http(then).post({ jsonrpc: '2.0', method: 'notifications/initialized' }, headers);
  expect(ack.status, await ack.text()).toBe(202);
  return headers;
}

it('two resources/subscribe through two copies both stay in the record, at once or while one copy has not heard the other', async () => {
  const redis = await startRedis();
  started.push(() => redis.stop());
  const faults = await startRespFaultProxy(redis.port);
  started.push(() => faults.close());
  const a = instance('A', await freePort(), { ...ENV, REDIS_URL: redis.url });
  const b = instance('B', await freePort(), { ...ENV, REDIS_URL: faults.url });
  started.push(
    () => a.stop('SIGKILL'),
    () => b.stop('SIGKILL'),
  );
  await Promise.all([a.start(), b.start()]);
  const subscribe = (id: number, uri: string) => ({ jsonrpc: '2.0', id, method: 'resources/subscribe', params: { uri } });
  const urisSaved = async (headers: Record<string, string>): Promise<string[]> => {
    // The saves run after the answers: give them a moment.
    const deadline = Date.now() + 3_000;
    for (;;) {
      const raw = (await redisCommand(redis.port, 'HGET', `mcp-kit:{${headers['mcp-session-id']}}:s`, 'r')) as string;
      // The record as the session's hash keeps it: its subscriptions are `s`.
      const saved = JSON.parse(raw) as { s?: Array<{ uri: string }> };
      const uris = (saved.s ?? []).map((s) => s.uri).sort();
      if (uris.length === 2 || Date.now() > deadline) return uris;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  for (let round = 0; round < 6; round++) {
    // Both instances hold a copy first (B's is made by the initialized notification).
    const headers = await session(a.url, b.url);
    const deaf = round % 2 === 1;
    if (deaf) {
      // B's bus connection is up (a new one replaces the last round's once its ping fails), then goes half-open.
      for (const deadline = Date.now() + 5_000; faults.subscribers(BUS) === 0 && Date.now() < deadline;)
        await new Promise((resolve) => setTimeout(resolve, 50));
      expect(faults.blackHoleSubscribers(BUS)).toBe(1);
    }
    const onA = http(a.url).post(subscribe(2, 'test://watched-resource'), headers);
    // Deaf: B's copy answers its own subscribe before it hears A's.
    if (deaf) expect((await onA).status).toBe(200);
    const onB = http(b.url).post(subscribe(3, 'test://static-text'), headers);
    const [fromA, fromB] = await Promise.all([onA, onB]);
    expect([fromA.status, fromB.status], `${await fromA.text()} ${await fromB.text()}`).toEqual([200, 200]);
    expect(await urisSaved(headers), `round ${round}${deaf ? ', B deaf' : ''}`).toEqual(['test://static-text', 'test://watched-resource']);
  }
}, 40_000);
