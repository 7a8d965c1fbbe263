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
import { stepsReached, type OutageKind } from '@mcp-kit/testbed/clients';
import type { LongTask } from '@mcp-kit/testbed/long-task';
import { rawCallAgain } from '../support/raw-chaos.js';
import { RedisClusterRun } from '../support/redis-cluster-run.js';

const LONG = process.env.LONG === '1';
const CLIENTS: Partial<Record<OutageKind, number>> = LONG
  ? { v1: 18, 'v2-legacy': 9, 'v2-auto': 9 }
  : { v1: 6, 'v2-legacy': 3, 'v2-auto': 3 };
const RAW_CLIENTS = LONG ? 9 : 3;
const ENV = { HEARTBEAT_MS: '500', RETRY_MS: '200', DRAIN_MS: '10000' };
const TASK: LongTask = { steps: 30, intervalMs: 100, closeEvery: 5, retryMs: 700 };

let run = new RedisClusterRun();

afterEach(async () => {
  await run.close();
  run = new RedisClusterRun();
});

async function failover(fault: 'kill' | 'pause'): Promise<void> {
  await run.start(ENV, CLIENTS, RAW_CLIENTS);
  const redis = run.redis!;
  const label = `redis cluster, a master ${fault === 'kill' ? 'killed' : 'paused'}`;
  const calls = run.calls(TASK, label);
  // Every 2025 SDK client was just sent away after step 5 (closeEvery 5): the master goes while they poll.
  await stepsReached(run.clients, 5);
  // The master serving the most of the clients' sessions.
  const slots = await run.sessionSlots();
  const count = (port: number) => slots.filter((s) => s.master.port === port).length;
  const { master, slot } = [...slots].sort((a, b) => count(b.master.port) - count(a.master.port))[0]!;
  const from = run.proxy!.log.length;
  const outputFrom = run.instances.map((i) => i.output.length);
  const at = Date.now();
  if (fault === 'kill') await redis.kill(master);
  else redis.pause(master);
  const promoted = await redis.failedOver(master, slot);
  console.log(`[${label}] ${master.name} held ${count(master.port)} of the sessions; ${promoted.name} promoted in ${Date.now() - at} ms`);
  if (fault === 'pause') redis.resume(master);
  const outcomes = await calls.sdk;
  await calls.raw;
  run.audit(outcomes, TASK, { from, outputFrom, label, lostEventsAllowed: true, unavailableAllowed: true });

  // Every call started after the promotion completes, on every session.
  for (const c of run.clients)
    expect(await c.call({ steps: 3, intervalMs: 10 }), c.name).toEqual([{ type: 'text', text: 'completed 3 steps' }]);
  for (const c of run.raw) expect(await rawCallAgain(c), c.name).toEqual([{ type: 'text', text: 'completed 3 steps' }]);
  // Every instance sends commands to the promoted replica, and its live tails' connection is there
  // (the resumes of sessions on its slots were followed there).
  const after = await run.connectionsOn(promoted.port);
  console.log(`  connections on the promoted replica: ${[...after].map(([name, n]) => `${name}×${n}`).join(' ')}`);
  expect(after.get('mcp-kit') ?? 0, 'command connections on the promoted replica').toBeGreaterThanOrEqual(run.instances.length);
  for (const i of run.instances) expect(i.alive, i.name).toBe(true);
}

describe('a Redis Cluster master lost while the clients poll', () => {
  it('killed (SIGKILL), its replica promoted: no call waits for its timeout, each completes or ends with the lost-events error', async () => {
    await failover('kill');
  }, 120_000);

  it('paused (SIGSTOP) past cluster-node-timeout, its replica promoted, then resumed: the same', async () => {
    await failover('pause');
  }, 120_000);
});
