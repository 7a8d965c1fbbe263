/**
 * A shared cluster (invariant: wake-only): what one instance posts another over the bus must not be
 * lost to a subscriber that is away. Instance A reaches Redis through a fault proxy that can cut
 * its bus subscriber's connection alone (and refuse its reconnects) while its other connections
 * work; B reaches Redis directly. The client's answer to an elicitation A's call asked, posted
 * through B while A's subscriber is away, must reach the call once the subscriber is back, not
 * leave it to its own timeout; meanwhile A serves the session's other requests.
 */
import { afterEach, expect, it } from 'vitest';
import { startSharedPair } from '@mcp-kit/testbed/shared-pair';
import { callTool, initializeRequest, LEGACY } from '@mcp-kit/testbed/requests';
import { http } from '@mcp-kit/testbed/fetch-client';

/** A session's bus channel: `mcp-kit:{<session id>}:bus`. */
const BUS = /mcp-kit:\{[^}]*\}:bus/;

/** What each test started, stopped in reverse order after it. */
const started: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const stop of started.splice(0).reverse()) await stop();
});

/** A session initialized on `on` (declaring elicitation), `notifications/initialized` through `then`. */
async function session(on: string, then: string): Promise<Record<string, string>> {
  const request = initializeRequest(1);
  request.params.capabilities = { elicitation: {} };
  const init = await http(on).postSse(request);
  const sessionId = init.response.headers.get('mcp-session-id')!;
  await init.until((m) => m.id === 1);
  await init.ended_();
  const headers = { 'mcp-session-id': sessionId, 'mcp-protocol-version': LEGACY };
  const ack = await http(then).post({ jsonrpc: '2.0', method: 'notifications/initialized' }, headers);
  expect(ack.status, await ack.text()).toBe(202);
  return headers;
}

it("an elicitation's answer posted through B while A's bus subscriber is cut reaches A's call once it is back", async () => {
  const { faults, a, b } = await startSharedPair(started);
  const headers = await session(b.url, a.url);

  const call = await http(a.url).postSse(callTool(2, 'test_elicitation', { message: 'name?' }), headers);
  const asked = JSON.parse((await call.until((m) => m.method === 'elicitation/create')).at(-1)!.data!);
  // A's subscriber connection drops, and every reconnect of it fails, while its other connections work.
  expect(faults.cutSubscribers(BUS)).toBe(1);
  const answered = await http(b.url).post(
    { jsonrpc: '2.0', id: asked.id, result: { action: 'accept', content: { username: 'ada', email: 'ada@example.com' } } },
    headers,
  );
  expect(answered.status, await answered.text()).toBe(202);
  // Meanwhile A serves the session's other requests: its other connections work (it reads its inbox
  // through them), and a subscriber that keeps failing to come back is no reason for a 503.
  const statuses: number[] = [];
  for (const until = Date.now() + 1_500; Date.now() < until;) {
    const listed = await http(a.url).post({ jsonrpc: '2.0', id: 9, method: 'tools/list' }, headers);
    statuses.push(listed.status);
    await listed.text();
    await new Promise((resolve) => setTimeout(resolve, 30));
  }
  expect(statuses.filter((s) => s !== 200)).toEqual([]);
  faults.healSubscribers();
  // Back within a reconnect (ioredis waits up to 2 s between tries): the answer was kept for A.
  const blocks = await call
    .until((m) => m.id === 2, 8_000)
    .catch((error: Error) => {
      throw new Error(`${error.message}\n--- A ---\n${a.output.slice(-4_000)}`);
    });
  const result = blocks.at(-1)!;
  expect(JSON.parse(result.data!).result.content[0].text).toContain('ada@example.com');
}, 30_000);
