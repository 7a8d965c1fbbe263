/**
 * A shared cluster (`CLUSTER=shared`, no `internalUrl`; instances that cannot reach each
 * other): two built express-example instances on one redis-server, spoken to directly (no proxy),
 * so each request goes where the test says. One session's requests on both instances are
 * correct: what the client sends through one instance for a call running on the other reaches it
 * (an elicitation's answer, a cancel), a log level set through one holds on the other, a DELETE
 * through one ends the session on both, and a session is usable on the other instance the moment
 * its `initialize` is answered.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type Instance, type TestCluster } from '@mcp-kit/testbed/cluster';
import { callTool, initializeRequest, LEGACY } from '@mcp-kit/testbed/requests';
import { http } from '@mcp-kit/testbed/fetch-client';
import { messagesOf, parseSse } from '@mcp-kit/testbed/sse';

let cluster: TestCluster;
let a: Instance;
let b: Instance;

beforeAll(async () => {
  cluster = await startCluster(2, { CLUSTER: 'shared', HEARTBEAT_MS: '300', RETRY_MS: '100', LIVE_PAGE: '0' });
  [a, b] = cluster.instances as [Instance, Instance];
}, 60_000);

afterAll(async () => {
  await cluster?.close();
});

/** `initialize` answered by `on`, then `notifications/initialized` through `then` at once. */
async function session(on: Instance, then: Instance): Promise<Record<string, string>> {
  const request = initializeRequest(1);
  request.params.capabilities = { elicitation: {} };
  const init = await http(on.url).postSse(request);
  const sessionId = init.response.headers.get('mcp-session-id')!;
  await init.until((m) => m.id === 1);
  await init.ended_();
  const headers = { 'mcp-session-id': sessionId, 'mcp-protocol-version': LEGACY };
  const ack = await http(then.url).post({ jsonrpc: '2.0', method: 'notifications/initialized' }, headers);
  expect(ack.status, await ack.text()).toBe(202);
  return headers;
}

const stepsOf = (blocks: { data?: string }[]) =>
  blocks
    .filter((b) => b.data)
    .map((b) => JSON.parse(b.data!))
    .filter((m) => m.method === 'notifications/message')
    .map((m) => m.params.data.step);

it('a session initialized on A is served on B at once (its record is saved before the answer goes out)', async () => {
  for (let i = 0; i < 20; i++) {
    const headers = await session(a, b);
    const listed = await http(b.url).postSse({ jsonrpc: '2.0', id: 2, method: 'tools/list' }, headers);
    const answer = (await listed.until((m) => m.id === 2)).at(-1)!;
    expect(JSON.parse(answer.data!).result.tools.length).toBeGreaterThan(0);
  }
});

it("the client's answer to an elicitation asked by a call on A, posted to B, reaches A's call", async () => {
  const headers = await session(a, b);
  const call = await http(a.url).postSse(callTool(2, 'test_elicitation', { message: 'name?' }), headers);
  const asked = (await call.until((m) => m.method === 'elicitation/create')).at(-1)!;
  const question = JSON.parse(asked.data!);
  // The server's request id names instance A, whatever its server numbered it.
  expect(typeof question.id).toBe('string');
  const answered = await http(b.url).post(
    { jsonrpc: '2.0', id: question.id, result: { action: 'accept', content: { username: 'ada', email: 'ada@example.com' } } },
    headers,
  );
  expect(answered.status).toBe(202);
  const result = (await call.until((m) => m.id === 2)).at(-1)!;
  expect(JSON.parse(result.data!).result.content[0].text).toContain('ada@example.com');
});

it('notifications/cancelled posted to B cancels the call running on A: its stream ends without an answer', async () => {
  const headers = await session(a, b);
  const call = await http(a.url).postSse(callTool(2, 'long_task', { steps: 50, intervalMs: 100 }), headers);
  await call.until((m) => m.method === 'notifications/message' && m.params.data.step === 2);
  const cancelled = await http(b.url).post(
    { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 2, reason: 'test' } },
    headers,
  );
  expect(cancelled.status).toBe(202);
  await call.ended_(3_000);
  const messages = call.blocks.filter((blk) => blk.data).map((blk) => JSON.parse(blk.data!));
  expect(messages.find((m) => m.id === 2)).toBeUndefined();
  expect(stepsOf(call.blocks).length).toBeLessThan(20);
});

it('logging/setLevel through B holds for a call on A (a copy made before the change, and one made after)', async () => {
  const headers = await session(a, b);
  // A's copy exists (it answered initialize); B's is made by the setLevel.
  const set = await http(b.url).postSse({ jsonrpc: '2.0', id: 2, method: 'logging/setLevel', params: { level: 'error' } }, headers);
  await set.until((m) => m.id === 2);
  const onA = await http(a.url).postSse(callTool(3, 'long_task', { steps: 3, intervalMs: 10 }), headers);
  await onA.until((m) => m.id === 3);
  expect(stepsOf(onA.blocks)).toEqual([]);
  const onB = await http(b.url).postSse(callTool(4, 'long_task', { steps: 3, intervalMs: 10 }), headers);
  await onB.until((m) => m.id === 4);
  expect(stepsOf(onB.blocks)).toEqual([]);
  // And back to info through A: B's copy hears it too.
  const back = await http(a.url).postSse({ jsonrpc: '2.0', id: 5, method: 'logging/setLevel', params: { level: 'info' } }, headers);
  await back.until((m) => m.id === 5);
  const deadline = Date.now() + 5_000;
  for (let id = 6; ; id++) {
    const again = await http(b.url).postSse(callTool(id, 'long_task', { steps: 3, intervalMs: 10 }), headers);
    await again.until((m) => m.id === id);
    if (stepsOf(again.blocks).length === 3) break;
    if (Date.now() > deadline) throw new Error('B never heard the level set through A');
  }
});

it("a DELETE through B ends the session on A too: A's running call ends, and the session is gone everywhere", async () => {
  const headers = await session(a, b);
  const call = await http(a.url).postSse(callTool(2, 'long_task', { steps: 50, intervalMs: 100 }), headers);
  await call.until((m) => m.method === 'notifications/message' && m.params.data.step === 1);
  const deleted = await http(b.url).del(headers);
  expect(deleted.status).toBe(200);
  await call.ended_(3_000);
  for (const inst of [a, b]) {
    const after = await http(inst.url).post({ jsonrpc: '2.0', id: 9, method: 'tools/list' }, headers);
    expect(after.status).toBe(404);
  }
});

/** Restarts the cluster's redis-server empty, then resumes `cursor` through B (503 while B reconnects). */
async function resumeAfterRedisRestart(headers: Record<string, string>, cursor: string): Promise<{ status: number; body: string }> {
  await cluster.redis.stop();
  await cluster.redis.start();
  // Until B's connection to the new server is up (ioredis reconnects on its own), B sends the
  // client back to come later: 200, a priming event whose id is the cursor marked with a count,
  // and a retry (invariant: come-back-later). A client comes back from that id, as SDK clients do.
  const deadline = Date.now() + 10_000;
  let lastEventId = cursor;
  for (;;) {
    const resumed = await http(b.url).get({ ...headers, 'last-event-id': lastEventId });
    const body = await resumed.text();
    const later = resumed.status === 200 && messagesOf(parseSse(body)).length === 0 ? /^id: (.+~\d+)$/m.exec(body) : null;
    if (!later || Date.now() > deadline) return { status: resumed.status, body };
    expect(later[1]!.startsWith(`${cursor}~`), body).toBe(true);
    lastEventId = later[1]!;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

// Last: they restart the cluster's redis-server.
describe.each([
  { when: 'mid-call', running: true },
  { when: 'after the call answered while its client was away', running: false },
])('Redis restarted empty $when', ({ running }) => {
  it('a resume through B, which cannot replay what A wrote, hears the lost-events error for the call A ran (not a 404, never a hang)', async () => {
    const headers = await session(a, b);
    const args = running
      ? { steps: 200, intervalMs: 50, closeEvery: 2, retryMs: 100 }
      : { steps: 4, intervalMs: 20, closeEvery: 2, retryMs: 100 };
    const call = await http(a.url).postSse(callTool(2, 'long_task', args), headers);
    await call.ended_();
    const cursor = call.blocks.filter((blk) => blk.id).at(-1)!.id!;
    expect(stepsOf(call.blocks)).toEqual([1, 2]);
    // The client stays away while A stores steps 3 to ~8 (50 ms apart), which the empty restart
    // then loses. (Restarted at once, A would store them after it: its writes wait out the outage,
    // and the resume would get every step.)
    if (running) await new Promise((resolve) => setTimeout(resolve, 300));
    if (!running) {
      // The call ends on A; its answer is read through B, then the client comes back from its
      // cursor again (its connection dropped before it read that answer).
      const read = await http(b.url).getSse({ ...headers, 'last-event-id': cursor });
      const answer = (await read.until((m) => m.id === 2)).at(-1)!;
      expect(JSON.parse(answer.data!).result.content[0].text).toBe('completed 4 steps');
    }
    const resumed = await resumeAfterRedisRestart(headers, cursor);
    expect(resumed.status, resumed.body).toBe(200);
    const answers = messagesOf(parseSse(resumed.body)).filter((m) => m.id === 2);
    expect(answers).toHaveLength(1);
    expect(answers[0].error.message).toMatch(/the event store lost this request's events/);
    // Its answer carries an event id: resuming past it there is nothing left (204), on either instance.
    const lastId = /^id: (.+)$/m.exec(resumed.body.slice(resumed.body.lastIndexOf('id: ')))![1]!;
    for (const inst of [a, b]) {
      const after = await http(inst.url).get({ ...headers, 'last-event-id': lastId });
      expect(after.status, `${inst.name}: ${await after.text()}`).toBe(204);
    }
    // The session takes a new call on A (a running tool was cancelled there).
    const again = await http(a.url).postSse(callTool(3, 'long_task', { steps: 2, intervalMs: 5 }), headers);
    const done = (await again.until((m) => m.id === 3)).at(-1)!;
    expect(JSON.parse(done.data!).result.content[0].text).toBe('completed 2 steps');
  }, 30_000);
});
