/**
 * The pace a tool sets with `closeSSEStream(ctx, retryMs)` is its call's own, on every instance and
 * across a rolling restart (SEP-1699: `retry`). The SDK v1 client keeps one retry for all its
 * streams (the last `retry:` it read, on any of them), so every stream the server ends or primes
 * for a call must carry that call's last close retry: a drain that ends a followed stream with the
 * handler's default, or a resume that repeats another call's retry, sets the client's pace wrong.
 *
 * Three Redis-backed express-example instances behind the round-robin proxy; one client runs a
 * call that closes with retry 150, then one that closes with 700 while every instance in turn gets
 * SIGTERM (drain), exits and starts again. Every reconnect of the second call comes ≥ 700 ms after
 * its previous connection ended, and every step arrives once, in order.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { startCluster, type ProxiedRequest, type TestCluster } from '@mcp-kit/testbed/cluster';
import { connectClient, type ClusterClient } from '@mcp-kit/testbed/clients';
import { oneTo } from '@mcp-kit/testbed/long-task';

const ENV = { HEARTBEAT_MS: '500', DRAIN_MS: '20000', RETRY_MS: '250' };
const FIRST = { steps: 4, intervalMs: 50, closeEvery: 1, retryMs: 150 };
const SECOND = { steps: 60, intervalMs: 100, closeEvery: 2, retryMs: 700 };
/** Long enough for three drains and restarts. */
const THIRD = { steps: 150, intervalMs: 100, closeEvery: 2, retryMs: 700 };
/** Timers never fire early; the proxy sees the end a little before the client does. */
const SLACK_MS = 30;

let cluster: TestCluster;
let client: ClusterClient;

beforeAll(async () => {
  cluster = await startCluster(3, ENV);
  client = await connectClient(cluster.proxy.url, 'pace');
}, 60_000);

afterAll(async () => {
  await client?.close();
  await cluster?.close();
});

/** The proxied requests of the stream whose event ids start with `token`, oldest first. */
function connectionsOf(log: ProxiedRequest[], token: string): ProxiedRequest[] {
  return log.filter((r) => r.lastEventId?.startsWith(`${token}.`)).sort((a, b) => a.at - b.at);
}

it('a second call polled at 700 ms keeps its pace through a rolling restart, after a first call at 150 ms', async () => {
  const first = await client.client.callTool({ name: 'long_task', arguments: FIRST }, CallToolResultSchema);
  expect(first.content).toEqual([{ type: 'text', text: `completed ${FIRST.steps} steps` }]);

  client.steps = [];
  let token: string | undefined;
  const postIndex = cluster.proxy.log.length;
  const second = client.client.callTool({ name: 'long_task', arguments: SECOND }, CallToolResultSchema, {
    timeout: 120_000,
    onresumptiontoken: (id) => (token ??= id.split('.')[0]),
  });
  // Drain (SIGTERM, then start again) whichever non-owner instance the call's client is following
  // the call on at that moment: its drain ends that stream, and the client comes back elsewhere.
  const owner = () => cluster.proxy.log.slice(postIndex).find((r) => r.kind === 'request:tools/call')?.servedBy;
  let drained = 0;
  let done = false;
  void second.finally(() => (done = true)).catch(() => {});
  while (drained < 3 && !done) {
    const open = token && connectionsOf(cluster.proxy.log, token).find((r) => r.endedAt === undefined && r.servedBy !== owner());
    if (open) {
      const inst = cluster.byName(open.servedBy!);
      await inst.stop('SIGTERM');
      await inst.start();
      drained++;
    } else await new Promise((r) => setTimeout(r, 20));
  }
  const result = await second;
  expect(result.content).toEqual([{ type: 'text', text: `completed ${SECOND.steps} steps` }]);
  expect(client.steps).toEqual(oneTo(SECOND.steps));

  const post = cluster.proxy.log.slice(postIndex).find((r) => r.kind === 'request:tools/call')!;
  const resumes = connectionsOf(cluster.proxy.log, token!);
  const dump = cluster.proxy.log
    .slice(postIndex)
    .map((r) => `${r.method} ${r.kind} ${r.lastEventId ?? ''} ${r.status} ${r.servedBy} at=${r.at} end=${r.endedAt}`)
    .join('\n');
  expect(drained, dump).toBeGreaterThan(0);
  expect(resumes.length, dump).toBeGreaterThanOrEqual(3);
  const gaps: number[] = [];
  let previous = post;
  for (const r of resumes) {
    gaps.push(r.at - previous.endedAt!);
    previous = r;
  }
  const early = gaps.filter((g) => g < SECOND.retryMs - SLACK_MS);
  expect(early, `reconnect gaps (ms): ${gaps.join(', ')}\n${cluster.outputs()}`).toEqual([]);
}, 120_000);

it('the pace holds through a rolling restart of every instance, the call owner included', async () => {
  client.steps = [];
  let token: string | undefined;
  const postIndex = cluster.proxy.log.length;
  const call = client.client.callTool({ name: 'long_task', arguments: THIRD }, CallToolResultSchema, {
    timeout: 120_000,
    onresumptiontoken: (id) => (token ??= id.split('.')[0]),
  });
  let done = false;
  void call.finally(() => (done = true)).catch(() => {});
  const until = async (ready: () => boolean) => {
    while (!ready() && !done) await new Promise((r) => setTimeout(r, 20));
  };
  // Each instance in turn, while the call runs: SIGTERM (drain), exit, start again; the next one
  // once the client came back after it. The call's owner first: it drains for as long as the call
  // runs (DRAIN_MS), handing its client's resumes to the others.
  await until(() => token !== undefined);
  const owner = cluster.proxy.log.slice(postIndex).find((r) => r.kind === 'request:tools/call')!.servedBy!;
  const order = [cluster.byName(owner), ...cluster.instances.filter((i) => i.name !== owner)];
  let drained = 0;
  for (const inst of order) {
    await until(() => token !== undefined && connectionsOf(cluster.proxy.log, token).length >= 2);
    if (done) break;
    const seen = connectionsOf(cluster.proxy.log, token!).length;
    await inst.stop('SIGTERM');
    await inst.start();
    drained++;
    await until(() => connectionsOf(cluster.proxy.log, token!).length > seen);
  }
  const result = await call;
  expect(result.content).toEqual([{ type: 'text', text: `completed ${THIRD.steps} steps` }]);
  expect(client.steps).toEqual(oneTo(THIRD.steps));
  expect(drained).toBeGreaterThanOrEqual(1);
  const post = cluster.proxy.log.slice(postIndex).find((r) => r.kind === 'request:tools/call')!;
  const resumes = connectionsOf(cluster.proxy.log, token!);
  const gaps: number[] = [];
  let previous = post;
  for (const r of resumes) {
    gaps.push(r.at - previous.endedAt!);
    previous = r;
  }
  const dump = cluster.proxy.log
    .slice(postIndex)
    .map((r) => `${r.method} ${r.kind} ${r.lastEventId ?? ''} ${r.status} ${r.servedBy} at=${r.at} end=${r.endedAt}`)
    .join('\n');
  const early = gaps.filter((g) => g < THIRD.retryMs - SLACK_MS);
  expect(early, `reconnect gaps (ms): ${gaps.join(', ')}\n${dump}`).toEqual([]);
}, 120_000);
