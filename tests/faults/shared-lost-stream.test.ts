/**
 * A shared cluster: a stream the store lost (a failover to a replica that lacked it) is
 * resumed through B while A, which writes it, cannot reach Redis for a few seconds (it reconnects
 * after the same failover). Only A knows the stream's call, so B asks A to answer it
 * with the lost-events error; A hears the ask only once its subscriber is back. The client must
 * be sent back to come later meanwhile (`200`, a priming event that repeats its cursor marked
 * `~n`, a `retry:`), not told `404`/`410` after B's first wait: an SDK client counts those as
 * failed reconnects and, after two, leaves its call to the request timeout. Once A hears the ask,
 * the resume ends the call with the lost-events error.
 */
import { afterEach, expect, it } from 'vitest';
import { redisCommand } from '@mcp-kit/testbed/redis-command';
import { startSharedPair } from '@mcp-kit/testbed/shared-pair';
import { callTool, initializeRequest, LEGACY } from '@mcp-kit/testbed/requests';
import { http } from '@mcp-kit/testbed/fetch-client';
import { messagesOf, parseSse } from '@mcp-kit/testbed/sse';

const started: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const stop of started.splice(0).reverse()) await stop();
});

it('a resume through B of a stream the store lost, while A (its writer) cannot reach Redis, is sent back until A answers: the lost-events error, never 404/410', async () => {
  const { redis, faults, a, b } = await startSharedPair(started);
  const init = await http(a.url).postSse(initializeRequest(1));
  const sessionId = init.response.headers.get('mcp-session-id')!;
  await init.until((m) => m.id === 1);
  await init.ended_();
  const headers = { 'mcp-session-id': sessionId, 'mcp-protocol-version': LEGACY };
  expect((await http(b.url).post({ jsonrpc: '2.0', method: 'notifications/initialized' }, headers)).status).toBe(202);

  // A runs a long call and lets its client go after step 2 (closeEvery: 2).
  const call = await http(a.url).postSse(callTool(2, 'long_task', { steps: 400, intervalMs: 50, closeEvery: 2, retryMs: 100 }), headers);
  await call.ended_();
  const cursor = call.blocks.filter((blk) => blk.id).at(-1)!.id!;
  const streamId = cursor.slice(0, cursor.lastIndexOf('.'));
  // A is cut off from Redis (every connection dropped, reconnects refused) while the store loses
  // the stream: it can neither write nor hear the bus until the partition heals.
  faults.cut();
  const keys = (await redisCommand(redis.port, 'KEYS', `*${streamId}*`)) as string[];
  expect(keys.length).toBeGreaterThan(0);
  await redisCommand(redis.port, 'DEL', ...keys);

  // The client resumes through B, as an SDK client does: from the id each priming event gives.
  const seen: string[] = [];
  let lastEventId = cursor;
  let healed = false;
  const startedAt = Date.now();
  for (;;) {
    const resumed = await http(b.url).get({ ...headers, 'last-event-id': lastEventId });
    const body = await resumed.text();
    seen.push(`${resumed.status} after ${Date.now() - startedAt} ms`);
    expect(resumed.status, `${seen.join(', ')}: ${body}`).toBe(200);
    const answers = messagesOf(parseSse(body)).filter((m) => m.id === 2);
    if (answers.length > 0) {
      expect(answers[0]!.error?.message, body).toMatch(/the event store lost this request's events/);
      break;
    }
    const later = /^id: (.+~\d+)$/m.exec(body);
    expect(later, `${seen.join(', ')}: neither the answer nor a cursor to come back from: ${body}`).not.toBeNull();
    lastEventId = later![1]!;
    // A is back after B's first wait for its answer has run out.
    if (!healed && Date.now() - startedAt > 2_500) {
      faults.heal();
      healed = true;
    }
    const retry = Number(/^retry: (\d+)$/m.exec(body)?.[1] ?? 100);
    await new Promise((resolve) => setTimeout(resolve, retry));
  }
  expect(healed, seen.join(', ')).toBe(true);
}, 60_000);

it('a resume of a lost stream whose writer is gone for good is sent back a bounded number of times, then hears 404', async () => {
  const { redis, a, b } = await startSharedPair(started);
  const init = await http(a.url).postSse(initializeRequest(1));
  const sessionId = init.response.headers.get('mcp-session-id')!;
  await init.until((m) => m.id === 1);
  await init.ended_();
  const headers = { 'mcp-session-id': sessionId, 'mcp-protocol-version': LEGACY };
  const call = await http(a.url).postSse(callTool(2, 'long_task', { steps: 400, intervalMs: 50, closeEvery: 2, retryMs: 100 }), headers);
  await call.ended_();
  const cursor = call.blocks.filter((blk) => blk.id).at(-1)!.id!;
  const streamId = cursor.slice(0, cursor.lastIndexOf('.'));
  await a.stop('SIGKILL');
  await redisCommand(redis.port, 'DEL', ...((await redisCommand(redis.port, 'KEYS', `*${streamId}*`)) as string[]));

  // The client comes back at once each time (the server counts the marks, not the time).
  const marks: string[] = [];
  let lastEventId = cursor;
  for (;;) {
    const resumed = await http(b.url).get({ ...headers, 'last-event-id': lastEventId });
    const body = await resumed.text();
    if (resumed.status !== 200) {
      expect(resumed.status, body).toBe(404);
      break;
    }
    lastEventId = /^id: (.+~\d+)$/m.exec(body)![1]!;
    marks.push(lastEventId.slice(lastEventId.lastIndexOf('~')));
    expect(marks.length, marks.join(' ')).toBeLessThanOrEqual(4);
  }
  expect(marks).toEqual(['~1', '~2', '~3', '~4']);
}, 60_000);
