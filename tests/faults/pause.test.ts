/**
 * One of three Redis-backed instances stops beating while SDK clients poll long_task calls on all
 * of them (the fault battery's first scenario), in two ways: the process is paused past
 * its heartbeat window (SIGSTOP, then SIGCONT), or it keeps running but loses Redis (a proxy in
 * front of Redis that the test cuts for that instance only, then heals); the load balancer takes it
 * out of rotation meanwhile, as a failed health check would. The audit: calls elsewhere complete with
 * every step once and in order; calls on the stricken instance complete or end with the documented
 * lost-instance error, with the steps they heard in order and never twice; no 5xx but 502/503; each
 * session has one owner afterwards and takes another call.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { CLUSTER_MODE, instance, roundRobinProxy, type Instance, type RoundRobinProxy } from '@mcp-kit/testbed/cluster';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';
import { freePort } from '@mcp-kit/testbed/processes';
import { startRespFaultProxy, type RespFaultProxy } from '@mcp-kit/testbed/resp-faults';
import { connectClient, stepsReached, type ClusterClient } from '@mcp-kit/testbed/clients';
import { oneTo, type LongTask } from '@mcp-kit/testbed/long-task';
import { seedFor } from '@mcp-kit/testbed/random';
import { auditRawChaos, describeRawChaos, RawChaosClient } from '../support/raw-chaos.js';

const HEARTBEAT_MS = 300;
const WINDOW_MS = 3 * HEARTBEAT_MS;
// pnpm test:chaos (LONG=1) runs 10× the clients.
const PER_INSTANCE = process.env.LONG === '1' ? 30 : 3;
const RAW_PER_INSTANCE = process.env.LONG === '1' ? 10 : 1;
const TASK: LongTask = { steps: 24, intervalMs: 100, closeEvery: 4, retryMs: 150 };
const ENV = { HEARTBEAT_MS: String(HEARTBEAT_MS), RETRY_MS: '150', DRAIN_MS: '10000' };
// In a shared cluster (MCP_KIT_CLUSTER=shared) a call runs where its POST landed, not on the
// instance that initialized its session.
const SHARED = CLUSTER_MODE === 'shared';

let redis: TestRedis | undefined;
let faults: RespFaultProxy | undefined;
let instances: Instance[] = [];
let proxy: RoundRobinProxy | undefined;
let clients: ClusterClient[] = [];
let raw: RawChaosClient[] = [];

afterEach(async () => {
  for (const i of instances) if (i.alive) process.kill(i.pid, 'SIGCONT');
  await Promise.all(clients.map((c) => c.close()));
  clients = [];
  await Promise.all(raw.map((c) => c.close()));
  raw = [];
  await proxy?.close();
  for (const i of instances) await i.stop('SIGKILL');
  instances = [];
  await faults?.close();
  await redis?.stop();
  faults = undefined;
  redis = undefined;
});

describe.each([
  { how: 'paused with SIGSTOP past its heartbeat window, then resumed', partition: false },
  { how: 'cut off from Redis alone past its heartbeat window, then reconnected', partition: true },
])('one instance of three $how', ({ partition }) => {
  it('calls elsewhere complete untouched; its calls complete or end with the lost-instance error; one owner per session after', async () => {
    redis = await startRedis();
    faults = await startRespFaultProxy(redis.port);
    for (let i = 0; i < 3; i++) {
      const url = i === 1 && partition ? faults.url : redis.url;
      instances.push(instance(`node-${i}`, await freePort(), { ...ENV, REDIS_URL: url }));
    }
    await Promise.all(instances.map((i) => i.start()));
    proxy = await roundRobinProxy(instances.map((i) => i.port));
    const owners = new Map<ClusterClient, string>();
    for (const [index, inst] of instances.entries()) {
      for (let n = 0; n < PER_INSTANCE; n++) {
        proxy.steer('initialize', index);
        const c = await connectClient(proxy.url, `${inst.name}-${n}`);
        clients.push(c);
        owners.set(c, inst.name);
      }
    }
    // Beside them, raw chaos clients on every instance: two calls each, their own cuts and resumes.
    const rawOwners = new Map<string, string>();
    for (const [index, inst] of instances.entries()) {
      for (let n = 0; n < RAW_PER_INSTANCE; n++) {
        proxy.steer('initialize', index);
        const c = await RawChaosClient.open(proxy.url, `raw-${inst.name}-${n}`);
        raw.push(c);
        rawOwners.set(c.name, inst.name);
      }
    }
    const stricken = instances[1]!;
    const from = proxy.log.length;
    // Whether a session's calls may have run on the stricken instance (only those may end early).
    const ranOnStricken = (sessionId: string, initializedOn: string | undefined) =>
      SHARED
        ? proxy!.log.slice(from).some((r) => r.sessionId === sessionId && r.kind === 'request:tools/call' && r.servedBy === stricken.name)
        : initializedOn === stricken.name;
    const seed = seedFor(partition ? 'partition' : 'pause');
    const rawRuns = raw.map((c, i) => c.run({ ...TASK, calls: 2, seed: seed + i }));
    const calls = clients.map((c) =>
      c.callLongTask(TASK, { timeoutMs: 30_000 }).then(
        (r) => ({ ok: r }),
        (error: unknown) => ({ error: String(error) }),
      ),
    );
    await stepsReached(clients, 6);
    // Either way the load balancer takes it out of rotation (its health check fails): an instance
    // that cannot reach Redis can only answer 503 for other instances' sessions, and an SDK v1
    // client gives a stream up after two failed reconnects.
    proxy.setDown(1, true);
    if (partition) faults.cut();
    else process.kill(stricken.pid, 'SIGSTOP');
    // Past the window (and a beat), its peers count it as gone and restore its sessions on request.
    await new Promise((resolve) => setTimeout(resolve, WINDOW_MS + 2 * HEARTBEAT_MS));
    if (partition) faults.heal();
    else process.kill(stricken.pid, 'SIGCONT');
    proxy.setDown(1, false);
    const outcomes = await Promise.all(calls);
    await Promise.all(rawRuns);
    const statuses = new Map<number, number>();
    for (const r of proxy.log.slice(from)) statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    const lost = outcomes.filter((o) => 'error' in o).length;
    console.log(
      `[${partition ? 'partition' : 'pause'}] ${clients.length} calls: ${clients.length - lost} completed, ${lost} ended with an error; ` +
        `statuses ${[...statuses].map(([st, n]) => `${st}×${n}`).join(' ')}`,
    );
    for (const [i, o] of outcomes.entries()) {
      const c = clients[i]!;
      if ('ok' in o) {
        expect(o.ok.content, c.name).toEqual([{ type: 'text', text: `completed ${TASK.steps} steps` }]);
        expect(c.steps, c.name).toEqual(oneTo(TASK.steps));
      } else {
        // Only a call of the stricken instance may end early, and only with the documented error.
        expect(ranOnStricken(c.sessionId, owners.get(c)), `${c.name}: ${o.error}`).toBe(true);
        expect(o.error, c.name).toMatch(/server instance running this request was lost|Service Unavailable|event store lost/);
        expect(c.steps, c.name).toEqual(oneTo(c.steps.length));
      }
    }
    console.log(`[${partition ? 'partition' : 'pause'}] ${describeRawChaos(raw)}`);
    const rawSessions = new Map(raw.map((c) => [c.name, c.sessionId]));
    auditRawChaos(raw, TASK.steps, (client) => ranOnStricken(rawSessions.get(client)!, rawOwners.get(client)));
    expect([...statuses.keys()].filter((st) => st >= 500 && st !== 502 && st !== 503)).toEqual([]);
    // Every session takes another call, served by one owner.
    for (const c of clients) {
      const r = await c.callLongTask({ steps: 2, intervalMs: 5 });
      expect(r.content, c.name).toEqual([{ type: 'text', text: 'completed 2 steps' }]);
      expect(c.steps, c.name).toEqual([1, 2]);
    }
  }, 90_000);
});
