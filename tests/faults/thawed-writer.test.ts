/**
 * A thawed writer stops (invariants: at-most-once, one-writer). X runs a long call whose client is away polling; X is
 * frozen (SIGSTOP) past its heartbeat window, the client comes back through Y, and Y, taking the
 * session over, answers the call with the lost-call error. When X runs again its tool must not go
 * on beside that answer (its side effects would happen although the client was told to send the
 * request again): X's next append is refused for good, and X stops the tool instead of retrying.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisClient } from '@mcp-kit/redis';
import { startCluster, type Instance, type TestCluster } from '@mcp-kit/testbed/cluster';
import { callTool } from '@mcp-kit/testbed/requests';
import { http, openSession, SseStream } from '@mcp-kit/testbed/fetch-client';

const HEARTBEAT_MS = 300;

let cluster: TestCluster;
let x: Instance;
let y: Instance;
let admin: ReturnType<typeof createRedisClient>;

beforeAll(async () => {
  cluster = await startCluster(2, { HEARTBEAT_MS: String(HEARTBEAT_MS), RETRY_MS: '100' });
  [x, y] = cluster.instances as [Instance, Instance];
  admin = createRedisClient(cluster.redis.url);
  await new Promise<void>((resolve) => (admin.status === 'ready' ? resolve() : admin.once('ready', () => resolve())));
}, 60_000);

afterAll(async () => {
  admin?.disconnect();
  if (x) process.kill(x.pid, 'SIGCONT');
  await cluster?.close();
});

/** The Redis key of the stream an event id belongs to (the Redis store's layout). */
function streamKey(sessionId: string, eventId: string): string {
  return `mcp-kit:{${sessionId}}:${eventId.slice(0, eventId.lastIndexOf('.'))}`;
}

/**
 * How X's running call ended after its thaw: `calls stopped` (its append was refused for good),
 * or `session let go` (X's live feed reports the session closed since `since`). Rejects after 10 s.
 */
async function stopped(instance: Instance, from: number, since: number): Promise<string> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (
      /another instance took over a stream of this session; its 1 running request\(s\) here are stopped/.test(instance.output.slice(from))
    )
      return 'calls stopped';
    const controller = new AbortController();
    const response = await fetch(new URL('/mcp-kit/live/events', instance.url), { signal: controller.signal });
    // The feed opens with a block that carries only `retry:`; the history is the first message.
    const [history] = (await new SseStream(response, controller).until(() => true, 2_000)).slice(-1);
    controller.abort();
    const items = (JSON.parse(history.data ?? '{"items":[]}') as { items: Array<{ type: string; at: number }> }).items;
    if (items.some((item) => item.type === 'session.close' && item.at >= since)) return 'session let go';
    if (Date.now() > deadline) throw new Error(`X's call neither stopped nor let go 10 s after the thaw:\n${instance.output.slice(from)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('an owner frozen mid-call, whose call a peer answered meanwhile', () => {
  it('stops the tool when it runs again, and stores nothing past the answer', { timeout: 60_000 }, async () => {
    const { headers } = await openSession(http(x.url));
    const post = await http(x.url).postSse(callTool(2, 'long_task', { steps: 400, intervalMs: 25, closeEvery: 2, retryMs: 100 }), headers);
    const blocks = await post.until((m) => m.params?.data?.step === 2);
    await post.ended_();
    const cursor = blocks.filter((b) => b.id).at(-1)!.id!;
    const xId = x.output.match(/instance ([0-9a-f-]{36})/)![1]!;
    process.kill(x.pid, 'SIGSTOP');
    const deadline = Date.now() + 10_000;
    while ((await admin.exists(`mcp-kit:instance:${xId}`)) === 1) {
      if (Date.now() > deadline) throw new Error('X still counted as alive after 10 s');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    // The client comes back through Y: the call ends there with the lost-call error.
    const resumed = await http(y.url).getSse({ ...headers, 'last-event-id': cursor });
    const answer = JSON.parse((await resumed.until((m) => m.id === 2)).at(-1)!.data!);
    expect(answer.error?.message, JSON.stringify(answer)).toMatch(/instance|lost/);
    const from = x.output.length;
    const thawedAt = Date.now();
    process.kill(x.pid, 'SIGCONT');
    // X's tool stops, whichever comes first on X: its next step's append, refused for good (the
    // stream's calls are stopped), or its first beat, which finds the session taken over and lets
    // its copy go (the session ends, and with it the tool's request).
    const how = await stopped(x, from, thawedAt);
    console.log(`[thawed-writer] X's call after the thaw: ${how}`);
    expect(how).toMatch(/^(calls stopped|session let go)$/);
    // Not retried as an outage, and never reported as one.
    expect(x.output.slice(from)).not.toMatch(/append failed/);
    // Nothing is stored after the answer Y gave: the stream still ends with it.
    const last = (await admin.xrevrange(streamKey(headers['mcp-session-id']!, cursor), '+', '-', 'COUNT', 1))[0]!;
    expect(last[1][last[1].indexOf('f') + 1]).toContain(answer.error.message.slice(0, 40));
  });
});
