/**
 * A thawed writer stops (issue 27, item 9). X runs a long call whose client is away polling; X is
 * frozen (SIGSTOP) past its heartbeat window, the client comes back through Y, and Y, taking the
 * session over, answers the call with the lost-call error. When X runs again its tool must not go
 * on beside that answer (its side effects would happen although the client was told to send the
 * request again): X's next append is refused for good, and X stops the tool instead of retrying.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisClient } from '@mcp-kit/redis';
import { startCluster, type Instance, type TestCluster } from '../support/cluster.js';
import { callTool, http, openSession } from '../support/sse.js';

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

describe('an owner frozen mid-call, whose call a peer answered meanwhile', () => {
  it('stops the tool when it runs again, and stores nothing past the answer', async () => {
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
    process.kill(x.pid, 'SIGCONT');
    // X's tool takes its next step at once: the append is refused for good and the tool stopped.
    await x.waitFor(/another instance took over a stream of this session; its 1 running request\(s\) here are stopped/, 10_000);
    // Not retried as an outage, and never reported as one.
    expect(x.output.slice(from)).not.toMatch(/append failed/);
  }, 60_000);
});
