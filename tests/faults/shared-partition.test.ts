/**
 * A shared cluster (`mode: 'shared'`) whose instance A loses Redis for a while: what the other instances
 * post meanwhile never reaches it (pub/sub keeps nothing for a subscriber that is not connected).
 * The client's DELETE through B in that window ends the session everywhere else; A's copy must not
 * live on: once A is back, the session is gone there too (404), and the call A's copy ran has ended.
 */
import { afterEach, expect, it } from 'vitest';
import { startSharedPair } from '@mcp-kit/testbed/shared-pair';
import { callTool, initializeRequest, LEGACY } from '@mcp-kit/testbed/requests';
import { http } from '@mcp-kit/testbed/fetch-client';

/** What each test started, stopped in reverse order after it. */
const started: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const stop of started.splice(0).reverse()) await stop();
});

it('a session deleted through B while A was cut off from Redis is gone on A once A is back: 404, and its call there ended', async () => {
  const { faults, a, b } = await startSharedPair(started);

  const init = await http(b.url).postSse(initializeRequest(1));
  const sessionId = init.response.headers.get('mcp-session-id')!;
  await init.until((m) => m.id === 1);
  const headers = { 'mcp-session-id': sessionId, 'mcp-protocol-version': LEGACY };
  expect((await http(a.url).post({ jsonrpc: '2.0', method: 'notifications/initialized' }, headers)).status).toBe(202);
  // A call runs on A's copy (no closes: its stream stays open while A is cut off).
  const call = await http(a.url).postSse(callTool(2, 'long_task', { steps: 400, intervalMs: 50 }), headers);
  await call.until((m) => m.method === 'notifications/message' && m.params.data.step === 1);

  faults.cut();
  const deleted = await http(b.url).del(headers);
  expect(deleted.status, await deleted.text()).toBe(200);
  // The partition lasts until A has noticed it (its next request for the session is a 503, not its
  // copy's answer): healed the moment the DELETE was answered, A's loop could take a request before
  // the closes of its Redis connections, and serve its copy (a CI run, under load: 200).
  const cutDeadline = Date.now() + 15_000;
  for (;;) {
    const during = await http(a.url).post({ jsonrpc: '2.0', id: 4, method: 'tools/list' }, headers);
    await during.text();
    if (during.status === 503 || Date.now() > cutDeadline) {
      expect(during.status).toBe(503);
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  faults.heal();

  // A answers 503 while it cannot reach Redis; then the session is gone there too.
  const deadline = Date.now() + 15_000;
  let after: Response;
  for (;;) {
    after = await http(a.url).post({ jsonrpc: '2.0', id: 3, method: 'tools/list' }, headers);
    if (after.status !== 503 || Date.now() > deadline) break;
    await after.text();
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  expect(after.status, await after.text()).toBe(404);
  await call.ended_(5_000);
  const answered = call.blocks.filter((blk) => blk.data).some((blk) => JSON.parse(blk.data!).id === 2);
  expect(answered).toBe(false);
}, 60_000);
