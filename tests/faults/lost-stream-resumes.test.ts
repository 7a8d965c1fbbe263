/**
 * Redis lost a running call's stream (restarted empty, or a failover to a replica that lacked it)
 * and the client comes back more than once at nearly the same moment: a raw client that cut its
 * first resume right after the priming event and resumed at once, or two tabs. The first resume
 * ends the call with the lost-events error, stored as the stream's final frame; a resume that read
 * the store before that frame was in must not take the gap for an eviction (`410 Gone`, which the
 * fault battery's audit refuses and an SDK client counts as a failed reconnect): it reads again
 * once the stream's frames are stored and hears the same error (or, replaced by a later resume, is sent back). Seen once in a fresh clone's
 * redis-restart (Redis restarted empty): a raw chaos client's resume answered 410.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startCluster, type TestCluster } from '@mcp-kit/testbed/cluster';
import { redisCommand } from '@mcp-kit/testbed/redis-command';
import { callTool, initializeRequest, LEGACY } from '@mcp-kit/testbed/requests';
import { http } from '@mcp-kit/testbed/fetch-client';
import { messagesOf, parseSse } from '@mcp-kit/testbed/sse';

let cluster: TestCluster;
beforeAll(async () => {
  cluster = await startCluster(1, { HEARTBEAT_MS: '500', RETRY_MS: '100' });
}, 60_000);
afterAll(async () => {
  await cluster?.close();
});

it('resumes of a lost stream sent at the same moment each hear the lost-events error or are sent back, none 404 or 410', async () => {
  const url = cluster.instances[0]!.url;
  const init = await http(url).postSse(initializeRequest(1));
  const sessionId = init.response.headers.get('mcp-session-id')!;
  await init.until((m) => m.id === 1);
  await init.ended_();
  const headers = { 'mcp-session-id': sessionId, 'mcp-protocol-version': LEGACY };
  expect((await http(url).post({ jsonrpc: '2.0', method: 'notifications/initialized' }, headers)).status).toBe(202);
  const call = await http(url).postSse(callTool(2, 'long_task', { steps: 400, intervalMs: 50, closeEvery: 2, retryMs: 100 }), headers);
  await call.ended_();
  const cursor = call.blocks.filter((blk) => blk.id).at(-1)!.id!;
  const streamId = cursor.slice(0, cursor.lastIndexOf('.'));
  const keys = (await redisCommand(cluster.redis.port, 'KEYS', `*${streamId}*`)) as string[];
  expect(keys.length).toBeGreaterThan(0);
  await redisCommand(cluster.redis.port, 'DEL', ...keys);

  const resumes = await Promise.all(
    Array.from({ length: 4 }, async () => {
      const res = await http(url).get({ ...headers, 'last-event-id': cursor });
      return { status: res.status, body: await res.text() };
    }),
  );
  // Each is the client's latest connection when it arrives: it hears the error, or (replaced by a
  // later one) a server close with a retry hint that sends it back. Never 404 or 410.
  const heard = resumes.map(({ status, body }) => {
    expect(status, body).toBe(200);
    const answers: Array<{ error?: { message: string } }> = messagesOf(parseSse(body)).filter((m) => m.id === 2);
    if (answers.length === 0) expect(body, 'neither the answer nor a retry hint').toMatch(/^retry: \d+$/m);
    for (const answer of answers) expect(answer.error?.message, body).toMatch(/the event store lost this request's events/);
    return answers.length;
  });
  console.log(
    `[lost stream] ${resumes.length} resumes at once: ${heard.filter((n) => n === 1).length} heard the error, the others were sent back`,
  );
  expect(heard.filter((n) => n === 1).length, JSON.stringify(resumes)).toBeGreaterThan(0);
}, 30_000);
