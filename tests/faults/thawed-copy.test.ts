/**
 * A shared cluster (invariants: deployment-owns-sessions, wake-only). Instance A reaches Redis through a fault proxy that can
 * leave its bus subscriber's connection half-open (every byte held both ways, nothing closed, as a
 * NAT that forgot the flow does); B reaches Redis directly.
 * - A copy frozen (SIGSTOP) while its session is deleted through B, its bus connection gone
 *   half-open meanwhile (a serverless instance frozen for minutes), is sent a request for that
 *   session the moment it thaws: 404 (or 503 while it cannot check), never 200.
 * - A half-open bus subscriber is noticed (pinged), so an elicitation's answer posted through B
 *   meanwhile still reaches A's call.
 */
import { afterEach, expect, it } from 'vitest';
import { instance } from '@mcp-kit/testbed/cluster';
import { startRedis } from '@mcp-kit/testbed/redis';
import { freePort } from '@mcp-kit/testbed/processes';
import { startRespFaultProxy } from '@mcp-kit/testbed/resp-faults';
import { callTool, initializeRequest, LEGACY } from '@mcp-kit/testbed/requests';
import { http } from '@mcp-kit/testbed/fetch-client';

const HEARTBEAT_MS = 300;
const ENV = { CLUSTER: 'shared', HEARTBEAT_MS: String(HEARTBEAT_MS), RETRY_MS: '100', LIVE_PAGE: '0' };
/** A session's bus channel: `mcp-kit:{<session id>}:bus`. */
const BUS = /mcp-kit:\{[^}]*\}:bus/;

/** What each test started, stopped in reverse order after it. */
const started: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const stop of started.splice(0).reverse()) await stop();
});

async function twoInstances() {
  const redis = await startRedis();
  started.push(() => redis.stop());
  const faults = await startRespFaultProxy(redis.port);
  started.push(() => faults.close());
  const a = instance('A', await freePort(), { ...ENV, REDIS_URL: faults.url });
  const b = instance('B', await freePort(), { ...ENV, REDIS_URL: redis.url });
  started.push(
    async () => {
      if (a.alive) process.kill(a.pid, 'SIGCONT');
      await a.stop('SIGKILL');
    },
    () => b.stop('SIGKILL'),
  );
  await Promise.all([a.start(), b.start()]);
  return { faults, a, b };
}

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

it('a copy frozen while its session was deleted through B answers 404 the moment it thaws, never 200', async () => {
  const { faults, a, b } = await twoInstances();
  for (let round = 0; round < 3; round++) {
    const headers = await session(b.url, a.url);
    const listed = await http(a.url).post({ jsonrpc: '2.0', id: 2, method: 'tools/list' }, headers);
    expect(listed.status, await listed.text()).toBe(200);
    // A's bus connection is up (after the last round, a new one replaces the one that went half-open).
    for (const deadline = Date.now() + 5_000; faults.subscribers(BUS) === 0 && Date.now() < deadline;)
      await new Promise((resolve) => setTimeout(resolve, 50));

    process.kill(a.pid, 'SIGSTOP');
    // While A is frozen its bus connection goes half-open: the DELETE's message never reaches it.
    expect(faults.blackHoleSubscribers(BUS)).toBe(1);
    const deleted = await http(b.url).del(headers);
    expect(deleted.status, await deleted.text()).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 3 * HEARTBEAT_MS));
    // The request is waiting in A's socket when it thaws.
    const asking = http(a.url).post({ jsonrpc: '2.0', id: 3, method: 'tools/list' }, headers);
    await new Promise((resolve) => setTimeout(resolve, 50));
    process.kill(a.pid, 'SIGCONT');
    const statuses: number[] = [];
    let after = await asking;
    for (const deadline = Date.now() + 10_000; ;) {
      statuses.push(after.status);
      await after.text();
      if (after.status !== 503 || Date.now() > deadline) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
      after = await http(a.url).post({ jsonrpc: '2.0', id: 3, method: 'tools/list' }, headers);
    }
    expect(
      statuses.filter((s) => s !== 503),
      `round ${round}: ${statuses.join(' ')}`,
    ).toEqual([404]);
  }
}, 30_000);

it("a half-open bus subscriber is noticed: an elicitation's answer posted through B meanwhile reaches A's call", async () => {
  const { faults, a, b } = await twoInstances();
  const headers = await session(b.url, a.url);
  const call = await http(a.url).postSse(callTool(2, 'test_elicitation', { message: 'name?' }), headers);
  const asked = JSON.parse((await call.until((m) => m.method === 'elicitation/create')).at(-1)!.data!);
  expect(faults.blackHoleSubscribers(BUS)).toBe(1);
  const answered = await http(b.url).post(
    { jsonrpc: '2.0', id: asked.id, result: { action: 'accept', content: { username: 'ada', email: 'ada@example.com' } } },
    headers,
  );
  expect(answered.status, await answered.text()).toBe(202);
  // Well before the call's own 60 s timeout: a ping that goes unanswered gives the connection up.
  const result = (await call.until((m) => m.id === 2, 10_000)).at(-1)!;
  expect(JSON.parse(result.data!).result.content[0].text).toContain('ada@example.com');
}, 30_000);
