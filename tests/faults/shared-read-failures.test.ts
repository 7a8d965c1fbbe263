/**
 * A shared cluster, and one Redis read that fails (a command timed out on a slow network, its
 * connection was reset): the request waiting on it must not end in a 503 the SDK client does not
 * retry (its call fails). Instance A reaches Redis through a proxy that fails the next command of
 * a kind; B reaches Redis directly.
 * - An instance without a copy of a session reads its record to serve it: the read is tried again,
 *   as an owner lookup is in forwarding mode.
 * - After a gap (its bus subscriber's connection dropped) an instance checks the copies it holds
 *   before it serves one, and never serves one unchecked: a failed check is made again.
 */
import { afterEach, expect, it } from 'vitest';
import type { RespFaultProxy } from '@mcp-kit/testbed/resp-faults';
import { startSharedPair } from '@mcp-kit/testbed/shared-pair';
import { http } from '@mcp-kit/testbed/fetch-client';
import { initializeRequest, LEGACY } from '@mcp-kit/testbed/requests';

/** A session's bus channel: `mcp-kit:{<session id>}:bus`. */
const BUS = /mcp-kit:\{[^}]*\}:bus/;

/** What each test started, stopped in reverse order after it. */
const started: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const stop of started.splice(0).reverse()) await stop();
});

/** A session initialized on `on`: the headers that name it. */
async function session(on: string): Promise<Record<string, string>> {
  const init = await http(on).postSse(initializeRequest(1));
  const sessionId = init.response.headers.get('mcp-session-id')!;
  await init.until((m) => m.id === 1);
  await init.ended_();
  return { 'mcp-session-id': sessionId, 'mcp-protocol-version': LEGACY };
}

/** The next `command` A sends fails; the rest pass. */
function failNext(faults: RespFaultProxy, command: string): void {
  let armed = true;
  faults.failWhen = (c) => {
    if (c !== command || !armed) return false;
    armed = false;
    return true;
  };
  faults.failRate = 1;
}

it("a failed read of a session's record for a copy is tried again: the request is served, not 503", async () => {
  const { faults, a, b } = await startSharedPair(started);
  const headers = await session(b.url);

  // The next HMGET A sends (the read of the session's record from its hash) fails.
  failNext(faults, 'HMGET');
  const listed = await http(a.url).post({ jsonrpc: '2.0', id: 2, method: 'tools/list' }, headers);
  const body = await listed.text();
  expect(faults.failed.get('HMGET')).toBe(1);
  // Not 503 "the session directory is unavailable; retry later", which ends an SDK client's call.
  expect(listed.status, body).toBe(200);
  expect(body).toContain('long_task');
}, 30_000);

it('a failed check of the copies held after a gap is made again: the request is served, not 503', async () => {
  const { faults, a, b } = await startSharedPair(started);
  const headers = await session(b.url);
  // A takes a copy of the session.
  const first = await http(a.url).post({ jsonrpc: '2.0', id: 2, method: 'tools/list' }, headers);
  expect(first.status, await first.text()).toBe(200);

  // A gap: A's subscriber drops (and stays away), so A checks its copies before serving one; the
  // first check's HEXISTS (is the session's record still there?) fails.
  expect(faults.cutSubscribers(BUS)).toBe(1);
  failNext(faults, 'HEXISTS');
  const listed = await http(a.url).post({ jsonrpc: '2.0', id: 3, method: 'tools/list' }, headers);
  const body = await listed.text();
  expect(faults.failed.get('HEXISTS')).toBe(1);
  // Not 503 "the session directory is unavailable; retry later".
  expect(listed.status, `${body}\n${a.output.slice(-2_000)}`).toBe(200);
}, 30_000);
