/**
 * A shared cluster: an instance that has no copy of a session reads the session's record from
 * Redis to serve its request. When that one read fails (a command timed out on a slow network,
 * its connection was reset), the request must not end in a 503 the SDK client does not retry (its
 * call fails): the read is tried again, as an owner lookup is in forwarding mode. Instance A
 * reaches Redis through a proxy that fails the next GET it sees; B reaches Redis directly.
 */
import { afterEach, expect, it } from 'vitest';
import { instance } from '../support/cluster.js';
import { freePort, startRedis } from '../support/redis.js';
import { startRespFaultProxy } from '../support/resp-faults.js';
import { http, initializeRequest, PROTOCOL } from '../support/sse.js';

const ENV = { CLUSTER: 'shared', HEARTBEAT_MS: '300', RETRY_MS: '100', LIVE_PAGE: '0' };

/** What the test started, stopped in reverse order after it. */
const started: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const stop of started.splice(0).reverse()) await stop();
});

it("a failed read of a session's record for a copy is tried again: the request is served, not 503", async () => {
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

  // The next GET A sends (the read of the session's record) fails; the rest pass.
  let armed = true;
  faults.failWhen = (command) => {
    if (command !== 'GET' || !armed) return false;
    armed = false;
    return true;
  };
  faults.failRate = 1;
  const listed = await http(a.url).post({ jsonrpc: '2.0', id: 2, method: 'tools/list' }, headers);
  const body = await listed.text();
  expect(faults.failed.get('GET')).toBe(1);
  // Before: 503 "the session directory is unavailable; retry later", which ends an SDK client's call.
  expect(listed.status, body).toBe(200);
  expect(body).toContain('long_task');
}, 30_000);
