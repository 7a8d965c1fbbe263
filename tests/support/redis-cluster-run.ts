/**
 * What the Redis Cluster fault suites share: three express-example instances on the testbed's
 * Redis Cluster (REDIS_CLUSTER_NODES) behind the round-robin proxy, SDK clients and raw chaos
 * clients calling long_task, and the audit of what each call ended with.
 */
import { expect } from 'vitest';
import { CLUSTER_MODE, instance, roundRobinProxy, type Instance, type RoundRobinProxy } from '@mcp-kit/testbed/cluster';
import { CLIENT_TIMEOUT_MS, connectOutageClients, timelineOf, type OutageClient, type OutageKind } from '@mcp-kit/testbed/clients';
import { oneTo, type LongTask } from '@mcp-kit/testbed/long-task';
import { freePort } from '@mcp-kit/testbed/processes';
import { seedFor } from '@mcp-kit/testbed/random';
import { redisCommand } from '@mcp-kit/testbed/redis-command';
import { startRedisCluster, type ClusterNode, type TestRedisCluster } from '@mcp-kit/testbed/redis-cluster';
import { auditRawChaos, describeRawChaos, RawChaosClient } from './raw-chaos.js';

/** The documented error of a call whose events the store lost. */
export const LOST_EVENTS = 'the event store lost this request';

export interface CallOutcome {
  client: OutageClient;
  steps: number[];
  ms: number;
  result?: unknown;
  error?: string;
}

/** A Redis Cluster, its instances, the proxy and the clients: what a suite drives and closes. */
export class RedisClusterRun {
  redis: TestRedisCluster | undefined;
  instances: Instance[] = [];
  proxy: RoundRobinProxy | undefined;
  clients: OutageClient[] = [];
  raw: RawChaosClient[] = [];

  /** Starts it all: `env` for every instance, `clients` SDK clients by kind, `rawClients` raw chaos clients. */
  async start(env: Record<string, string>, clients: Partial<Record<OutageKind, number>>, rawClients: number): Promise<void> {
    this.redis = await startRedisCluster();
    const instanceEnv = { ...env, REDIS_CLUSTER_NODES: this.redis.nodesEnv };
    for (let i = 0; i < 3; i++) this.instances.push(instance(`node-${i}`, await freePort(), instanceEnv));
    await Promise.all(this.instances.map((i) => i.start()));
    this.proxy = await roundRobinProxy(this.instances.map((i) => i.port));
    await connectOutageClients(this.proxy.url, clients, this.clients);
    for (let i = 0; i < rawClients; i++) this.raw.push(await RawChaosClient.open(this.proxy.url, `raw${i}`));
  }

  /** Every client's call of `task` (the SDK clients' outcomes; the raw clients run `calls` each), under way. */
  calls(task: LongTask, label: string, rawCalls = 2): { sdk: Promise<CallOutcome[]>; raw: Promise<unknown> } {
    const seed = seedFor(label);
    const raw = Promise.all(this.raw.map((c, i) => c.run({ ...task, calls: rawCalls, seed: seed + i, callDeadlineMs: CLIENT_TIMEOUT_MS })));
    return { sdk: Promise.all(this.clients.map((c) => call(c, task))), raw };
  }

  /** The slot of each client's session (its hash, `mcp-kit:{<id>}:s`), and the master serving it now. */
  async sessionSlots(): Promise<Array<{ slot: number; master: ClusterNode }>> {
    const slots = [];
    for (const c of this.clients) {
      if (!c.sessionId) continue;
      const slot = await this.redis!.slotOf(`mcp-kit:{${c.sessionId}}:s`);
      slots.push({ slot, master: await this.redis!.masterOf(slot) });
    }
    return slots;
  }

  /** The instances' connections on the node at `port`, by name (`mcp-kit`, `mcp-kit-tails`, `mcp-kit-bus`). */
  async connectionsOn(port: number): Promise<Map<string, number>> {
    const names = new Map<string, number>();
    for (const line of String(await redisCommand(port, 'CLIENT', 'LIST')).split('\n')) {
      const name = /\bname=(mcp-kit\S*)/.exec(line)?.[1];
      if (name) names.set(name, (names.get(name) ?? 0) + 1);
    }
    return names;
  }

  outputs(): string {
    return this.instances.map((i) => `--- ${i.name} ---\n${i.output.slice(-3_000)}`).join('\n');
  }

  /**
   * The audit since the proxy's log entry `from`: each SDK call completed with every step once and
   * in order, or (with `lostEventsAllowed`) ended with the lost-events error; the raw calls alike;
   * no 404; no 5xx but 502/503 (none at all without `unavailableAllowed`); in forwarding mode no
   * session restored on another instance after `outputFrom`.
   */
  audit(
    outcomes: CallOutcome[],
    task: LongTask,
    options: { from: number; outputFrom: number[]; label: string; lostEventsAllowed: boolean; unavailableAllowed: boolean },
  ): void {
    const requests = this.proxy!.log.slice(options.from);
    const statuses = new Map<number, number>();
    for (const r of requests) statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    const failed = outcomes.filter((o) => o.error !== undefined);
    const timeline = (c: OutageClient) => timelineOf(requests, c);
    console.log(
      `[${options.label}, ${CLUSTER_MODE}] ${outcomes.length} calls: ${outcomes.length - failed.length} completed, ` +
        `${failed.length} ended otherwise; slowest ${Math.max(...outcomes.map((o) => o.ms))} ms; ` +
        `statuses since: ${[...statuses].map(([st, n]) => `${st}×${n}`).join(' ')}`,
    );
    for (const o of failed)
      console.log(`  ${o.client.name}: ${o.error} after ${o.ms} ms, steps ${o.steps.join(',')}\n    ${timeline(o.client)}`);
    console.log(`  ${describeRawChaos(this.raw)}`);
    for (const o of outcomes) {
      const name = o.client.name;
      if (o.error === undefined) {
        expect(o.result, name).toEqual([{ type: 'text', text: `completed ${task.steps} steps` }]);
        expect(o.steps, name).toEqual(oneTo(task.steps));
      } else {
        // Only the documented error, never the client's own timeout; the steps heard before it in order.
        expect(options.lostEventsAllowed, `${name} after ${o.ms} ms: ${o.error}\n${timeline(o.client)}\n${this.outputs()}`).toBe(true);
        expect(o.error, `${name} after ${o.ms} ms: ${timeline(o.client)}\n${this.outputs()}`).toContain(LOST_EVENTS);
        expect(o.steps, name).toEqual(oneTo(o.steps.length));
      }
    }
    auditRawChaos(this.raw, task.steps, () => options.lostEventsAllowed);
    for (const o of this.raw.flatMap((c) => c.outcomes).filter((o) => o.result === undefined))
      expect(o.error?.message, `${o.client} call ${o.call}\n${this.outputs()}`).toContain(LOST_EVENTS);
    const allowed = options.unavailableAllowed ? [502, 503] : [];
    expect([...statuses.keys()].filter((st) => st >= 500 && !allowed.includes(st))).toEqual([]);
    expect(requests.filter((r) => r.status === 404)).toEqual([]);
    if (!options.unavailableAllowed) {
      const retried = this.raw.reduce((n, c) => n + c.tally.retried, 0);
      expect(retried, 'raw calls sent again after a 502/503').toBe(0);
    }
    // Forwarding: every instance lived through it, so no session changed hands.
    if (CLUSTER_MODE === 'forward') {
      const restored = this.instances.flatMap((i, n) => i.output.slice(options.outputFrom[n]).match(/restored session \S+/g) ?? []);
      expect(restored, this.outputs()).toEqual([]);
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.clients.map((c) => c.close()));
    this.clients = [];
    await Promise.all(this.raw.map((c) => c.close()));
    this.raw = [];
    await this.proxy?.close();
    this.proxy = undefined;
    for (const i of this.instances) await i.stop('SIGKILL');
    this.instances = [];
    await this.redis?.close();
    this.redis = undefined;
  }
}

async function call(c: OutageClient, task: LongTask): Promise<CallOutcome> {
  const started = Date.now();
  try {
    const result = await c.call(task);
    return { client: c, steps: [...c.steps], ms: Date.now() - started, result };
  } catch (error) {
    return { client: c, steps: [...c.steps], ms: Date.now() - started, error: String(error) };
  }
}
