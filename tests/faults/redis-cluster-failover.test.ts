/**
 * A master of a Redis Cluster lost mid-calls, its replica promoted by the cluster: three
 * express-example instances on a 3-master, 3-replica cluster (REDIS_CLUSTER_NODES;
 * packages/testbed/src/redis-cluster.ts, cluster-node-timeout 2 s) behind the round-robin proxy,
 * SDK v1 clients, SDK v2 clients (`legacy`: a 2025 session; the default negotiation, on
 * 2026-07-28) at their default settings and raw chaos clients (tests/support/raw-chaos.ts: two
 * calls each, cutting their own connections) call long_task with closeEvery. While the 2025
 * clients are away polling, the master serving the most of their sessions is
 *
 * - killed (SIGKILL): its connections close, and the cluster promotes its replica (3–5 s);
 * - paused (SIGSTOP) past cluster-node-timeout, then resumed (SIGCONT) once its replica is
 *   promoted: its connections stay open and answer nothing, so each instance must find each of
 *   them silent (the watchdog on every node's connection) and send to the promoted replica.
 *
 * The audit, as the Sentinel failover's: no call is left to its timeout; each completes with every
 * step once and in order, or ends with the documented lost-events error (replication is
 * asynchronous: the promoted replica may lack what the master acknowledged last); a raw call too;
 * no live session hears 404; no 5xx but 502/503; every call started after the promotion
 * completes; the instances' connections (commands, sharded tails and bus) are on the promoted
 * replica afterwards. Clients: 6 SDK v1, 3 SDK v2 of each negotiation and 3 raw; LONG=1: 18, 9 + 9 and 9.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { CLUSTER_MODE, instance, roundRobinProxy, type Instance, type RoundRobinProxy } from '@mcp-kit/testbed/cluster';
import { freePort } from '@mcp-kit/testbed/processes';
import { redisCommand } from '@mcp-kit/testbed/redis-command';
import { startRedisCluster, type ClusterNode, type TestRedisCluster } from '@mcp-kit/testbed/redis-cluster';
import { oneTo, type LongTask } from '@mcp-kit/testbed/long-task';
import {
  CLIENT_TIMEOUT_MS,
  connectOutageClients,
  stepsReached,
  timelineOf,
  type OutageClient,
  type OutageKind,
} from '@mcp-kit/testbed/clients';
import { seedFor } from '@mcp-kit/testbed/random';
import { auditRawChaos, describeRawChaos, rawCallAgain, RawChaosClient } from '../support/raw-chaos.js';

const LONG = process.env.LONG === '1';
const CLIENTS: Partial<Record<OutageKind, number>> = LONG
  ? { v1: 18, 'v2-legacy': 9, 'v2-auto': 9 }
  : { v1: 6, 'v2-legacy': 3, 'v2-auto': 3 };
const RAW_CLIENTS = LONG ? 9 : 3;
const ENV = { HEARTBEAT_MS: '500', RETRY_MS: '200', DRAIN_MS: '10000' };
const TASK: LongTask = { steps: 30, intervalMs: 100, closeEvery: 5, retryMs: 700 };
/** The documented error of a call whose events the store lost. */
const LOST_EVENTS = 'the event store lost this request';

let redis: TestRedisCluster | undefined;
let instances: Instance[] = [];
let proxy: RoundRobinProxy | undefined;
let clients: OutageClient[] = [];
let raw: RawChaosClient[] = [];

afterEach(async () => {
  await Promise.all(clients.map((c) => c.close()));
  clients = [];
  await Promise.all(raw.map((c) => c.close()));
  raw = [];
  await proxy?.close();
  proxy = undefined;
  for (const i of instances) await i.stop('SIGKILL');
  instances = [];
  await redis?.close();
  redis = undefined;
});

/** The instances' connections on the node at `port`, by name (`mcp-kit`, `mcp-kit-tails`, `mcp-kit-bus`). */
async function connectionsOn(port: number): Promise<Map<string, number>> {
  const names = new Map<string, number>();
  for (const line of String(await redisCommand(port, 'CLIENT', 'LIST')).split('\n')) {
    const name = /\bname=(mcp-kit\S*)/.exec(line)?.[1];
    if (name) names.set(name, (names.get(name) ?? 0) + 1);
  }
  return names;
}

interface Outcome {
  client: OutageClient;
  steps: number[];
  ms: number;
  result?: unknown;
  error?: string;
}

async function call(c: OutageClient): Promise<Outcome> {
  const started = Date.now();
  try {
    const result = await c.call(TASK);
    return { client: c, steps: [...c.steps], ms: Date.now() - started, result };
  } catch (error) {
    return { client: c, steps: [...c.steps], ms: Date.now() - started, error: String(error) };
  }
}

/** The master serving the most of the clients' sessions (their hashes, `mcp-kit:{<id>}:s`), and a slot of it. */
async function busiestMaster(cluster: TestRedisCluster): Promise<{ master: ClusterNode; slot: number; sessions: number }> {
  const bySlotMaster = new Map<number, { master: ClusterNode; slot: number; sessions: number }>();
  for (const c of clients) {
    if (!c.sessionId) continue;
    const slot = await cluster.slotOf(`mcp-kit:{${c.sessionId}}:s`);
    const master = await cluster.masterOf(slot);
    const seen = bySlotMaster.get(master.port) ?? { master, slot, sessions: 0 };
    seen.sessions++;
    bySlotMaster.set(master.port, seen);
  }
  return [...bySlotMaster.values()].sort((a, b) => b.sessions - a.sessions)[0]!;
}

async function failover(fault: 'kill' | 'pause'): Promise<void> {
  redis = await startRedisCluster();
  const env = { ...ENV, REDIS_CLUSTER_NODES: redis.nodesEnv };
  for (let i = 0; i < 3; i++) instances.push(instance(`node-${i}`, await freePort(), env));
  await Promise.all(instances.map((i) => i.start()));
  proxy = await roundRobinProxy(instances.map((i) => i.port));
  await connectOutageClients(proxy.url, CLIENTS, clients);
  for (let i = 0; i < RAW_CLIENTS; i++) raw.push(await RawChaosClient.open(proxy.url, `raw${i}`));

  const seed = seedFor(`redis cluster: a master ${fault === 'kill' ? 'killed' : 'paused'}`);
  const rawRuns = raw.map((c, i) => c.run({ ...TASK, calls: 2, seed: seed + i, callDeadlineMs: CLIENT_TIMEOUT_MS }));
  const calls = clients.map(call);
  // Every 2025 SDK client was just sent away after step 5 (closeEvery 5): the master goes while they poll.
  await stepsReached(clients, 5);
  const { master, slot, sessions } = await busiestMaster(redis);
  const from = proxy.log.length;
  const outputFrom = instances.map((i) => i.output.length);
  const at = Date.now();
  if (fault === 'kill') await redis.kill(master);
  else redis.pause(master);
  const promoted = await redis.failedOver(master, slot);
  const promotedMs = Date.now() - at;
  if (fault === 'pause') redis.resume(master);
  const outcomes = await Promise.all(calls);
  await Promise.all(rawRuns);

  const requests = proxy.log.slice(from);
  const statuses = new Map<number, number>();
  for (const r of requests) statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
  const failed = outcomes.filter((o) => o.error !== undefined);
  const timeline = (c: OutageClient) => timelineOf(requests, c);
  console.log(
    `[redis cluster, master ${fault === 'kill' ? 'killed' : 'paused'}, ${CLUSTER_MODE}] ${master.name} held ${sessions} of the sessions; ` +
      `${promoted.name} promoted in ${promotedMs} ms; ${outcomes.length} calls: ${outcomes.length - failed.length} completed, ` +
      `${failed.length} ended otherwise; slowest ${Math.max(...outcomes.map((o) => o.ms))} ms; ` +
      `statuses since the fault: ${[...statuses].map(([st, n]) => `${st}×${n}`).join(' ')}`,
  );
  for (const o of failed)
    console.log(`  ${o.client.name}: ${o.error} after ${o.ms} ms, steps ${o.steps.join(',')}\n    ${timeline(o.client)}`);
  console.log(`  ${describeRawChaos(raw)}`);

  const outputs = () => instances.map((i) => `--- ${i.name} ---\n${i.output.slice(-3_000)}`).join('\n');
  for (const o of outcomes) {
    const name = o.client.name;
    if (o.error === undefined) {
      expect(o.result, name).toEqual([{ type: 'text', text: `completed ${TASK.steps} steps` }]);
      expect(o.steps, name).toEqual(oneTo(TASK.steps));
    } else {
      // Only the documented error, never the client's own timeout; the steps heard before it in order.
      expect(o.error, `${name} after ${o.ms} ms: ${timeline(o.client)}\n${outputs()}`).toContain(LOST_EVENTS);
      expect(o.steps, name).toEqual(oneTo(o.steps.length));
    }
  }
  auditRawChaos(raw, TASK.steps);
  for (const o of raw.flatMap((c) => c.outcomes).filter((o) => o.result === undefined))
    expect(o.error?.message, `${o.client} call ${o.call}\n${outputs()}`).toContain(LOST_EVENTS);
  expect([...statuses.keys()].filter((st) => st >= 500 && st !== 502 && st !== 503)).toEqual([]);
  expect(requests.filter((r) => r.status === 404)).toEqual([]);
  // Forwarding: every instance lived through the failover, so no session changed hands.
  if (CLUSTER_MODE === 'forward') {
    const restored = instances.flatMap((i, n) => i.output.slice(outputFrom[n]).match(/restored session \S+/g) ?? []);
    expect(restored, outputs()).toEqual([]);
  }

  // Every call started after the promotion completes, on every session.
  for (const c of clients)
    expect(await c.call({ steps: 3, intervalMs: 10 }), c.name).toEqual([{ type: 'text', text: 'completed 3 steps' }]);
  for (const c of raw) expect(await rawCallAgain(c), c.name).toEqual([{ type: 'text', text: 'completed 3 steps' }]);
  // Every instance sends commands to the promoted replica, and its live tails' connection is there
  // (the resumes of sessions on its slots were followed there).
  const after = await connectionsOn(promoted.port);
  console.log(`  connections on the promoted replica: ${[...after].map(([name, n]) => `${name}×${n}`).join(' ')}`);
  expect(after.get('mcp-kit') ?? 0, 'command connections on the promoted replica').toBeGreaterThanOrEqual(instances.length);
  for (const i of instances) expect(i.alive, i.name).toBe(true);
}

describe('a Redis Cluster master lost while the clients poll', () => {
  it('killed (SIGKILL), its replica promoted: no call waits for its timeout, each completes or ends with the lost-events error', async () => {
    await failover('kill');
  }, 120_000);

  it('paused (SIGSTOP) past cluster-node-timeout, its replica promoted, then resumed: the same', async () => {
    await failover('pause');
  }, 120_000);
});
