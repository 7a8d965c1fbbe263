/**
 * A shared cluster: after a gap (its bus subscriber's connection dropped), an instance checks the
 * copies it holds before it serves one, and a deleted session is never served blind. When that
 * check fails once (a command failed or timed out on a slow, resetting network to Redis), the
 * request must not end in a 503 the SDK client does not retry: it waits for another check.
 * Instance A reaches Redis through a fault proxy; B reaches it directly.
 */
import { afterEach, expect, it } from 'vitest';
import { instance } from '../support/cluster.js';
import { freePort, startRedis } from '../support/redis.js';
import { startRespFaultProxy } from '../support/resp-faults.js';
import { http, initializeRequest, PROTOCOL } from '../support/sse.js';

const ENV = { CLUSTER: 'shared', HEARTBEAT_MS: '300', RETRY_MS: '100', LIVE_PAGE: '0' };
const BUS = /mcp-kit:bus:/;

/** What the test started, stopped in reverse order after it. */
const started: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const stop of started.splice(0).reverse()) await stop();
});

it('a failed check of the copies held after a gap is made again: the request is served, not 503', async () => {
  const redis = await startRedis();
  started.push(() => redis.stop());
  const faults = await startRespFaultProxy(redis.port);
  started.push(() => faults.close());
  const a = instance('A', await freePort(), { ...ENV, REDIS_URL: faults.url });
  const b = instance('B', await freePort(), { ...ENV, REDIS_URL: redis.url });
  started.push(
    () => a.stop('SIGKILL'),
    () => b.stop('SIGKILL'),
  );
  await Promise.all([a.start(), b.start()]);

  const init = await http(b.url).postSse(initializeRequest(1));
  const sessionId = init.response.headers.get('mcp-session-id')!;
  await init.until((m) => m.id === 1);
  await init.ended_();
  const headers = { 'mcp-session-id': sessionId, 'mcp-protocol-version': PROTOCOL };
  // A takes a copy of the session.
  const first = await http(a.url).post({ jsonrpc: '2.0', id: 2, method: 'tools/list' }, headers);
  expect(first.status, await first.text()).toBe(200);

  // A gap: A's subscriber drops (and stays away), so A checks its copies before serving one; the
  // first check's EXISTS fails.
  expect(faults.cutSubscribers(BUS)).toBe(1);
  let armed = true;
  faults.failWhen = (command) => {
    if (command !== 'EXISTS' || !armed) return false;
    armed = false;
    return true;
  };
  faults.failRate = 1;
  const listed = await http(a.url).post({ jsonrpc: '2.0', id: 3, method: 'tools/list' }, headers);
  const body = await listed.text();
  expect(faults.failed.get('EXISTS')).toBe(1);
  // Before: 503 "the session directory is unavailable; retry later".
  expect(listed.status, `${body}\n${a.output.slice(-2_000)}`).toBe(200);
}, 30_000);
