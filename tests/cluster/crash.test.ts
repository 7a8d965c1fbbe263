/**
 * A crash (SIGKILL) in a Redis-backed cluster of three built express-example instances behind the
 * round-robin proxy, and two instances racing to restore one session.
 *
 * After the crash: calls running on the surviving instances complete untouched; calls that were
 * running on the dead one end with the clear "instance was lost" error once its heartbeat expired;
 * the idle sessions it held are restored where their next request lands, for the same client, with
 * the same capabilities and log level.
 *
 * Run in both cluster modes (MCP_KIT_CLUSTER=shared: no internalUrl). In a shared cluster
 * a call runs on the instance its POST reached (not on the session's first instance), and every
 * instance a request reaches makes its own copy of the session: no forwarding, no single restore.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { http, openSession } from '@mcp-kit/testbed/fetch-client';
import { connectClient, Counter, type ClusterClient } from '@mcp-kit/testbed/clients';
import { oneTo, type LongTask } from '@mcp-kit/testbed/long-task';
import { CLUSTER_MODE, startCluster, type Instance, type TestCluster } from '@mcp-kit/testbed/cluster';

const HEARTBEAT_MS = 500;
const RETRY_MS = 250;
const ENV = { HEARTBEAT_MS: String(HEARTBEAT_MS), RETRY_MS: String(RETRY_MS), DRAIN_MS: '10000' };
/** How long after an instance's last beat it counts as gone (RedisSessionCluster: 3 beats). */
const HEARTBEAT_WINDOW_MS = 3 * HEARTBEAT_MS;
/** A follower checks its owner this often (RedisSessionCluster.ownerCheckMs: at least 1 s). */
const OWNER_CHECK_MS = Math.max(HEARTBEAT_MS, 1_000);
/** Per instance: clients with a call running at the crash, and idle ones. */
const BUSY_PER_INSTANCE = 4;
const IDLE_PER_INSTANCE = 4;
const LONG: LongTask = { steps: 24, intervalMs: 150, closeEvery: 4, retryMs: 200 };

let cluster: TestCluster;
const clients: ClusterClient[] = [];
const SHARED = CLUSTER_MODE === 'shared';

/** Where a client's current call runs: its session's owner, or (shared) the instance its tools/call reached. */
function runsOn(c: ClusterClient, owner: string): string {
  if (!SHARED) return owner;
  const posted = cluster.proxy.log.filter((r) => r.sessionId === c.sessionId && r.kind === 'request:tools/call').at(-1);
  return posted?.servedBy ?? owner;
}

beforeAll(async () => {
  cluster = await startCluster(3, ENV);
}, 60_000);

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await cluster?.close();
});

/**
 * Connects `perInstance` clients through the proxy whose sessions each instance owns: the proxy is
 * steered so that the initialize lands there (the owner, until something moves the session).
 */
async function clientsPerInstance(prefix: string, perInstance: number): Promise<Map<string, ClusterClient[]>> {
  const by = new Map<string, ClusterClient[]>();
  for (const [index, inst] of cluster.instances.entries()) {
    const list: ClusterClient[] = [];
    for (let n = 0; n < perInstance; n++) {
      const before = cluster.proxy.log.length;
      cluster.proxy.steer('initialize', index);
      const c = await connectClient(cluster.proxy.url, `${prefix}-${inst.name}-${n}`);
      clients.push(c);
      const owner = cluster.proxy.log.slice(before).find((r) => r.kind === 'initialize')?.servedBy;
      expect(owner).toBe(inst.name);
      list.push(c);
    }
    by.set(inst.name, list);
  }
  return by;
}

const restoredIn = (inst: Instance) => [...inst.output.matchAll(/restored session (\S+) for (\S+) \(capabilities: ([^)]*)\)/g)];

describe('SIGKILL of one of three instances', () => {
  it('calls elsewhere complete untouched; calls on the dead instance end with the lost-instance error; its idle sessions keep their client, capabilities and log level', async () => {
    const { instances, proxy } = cluster;
    const victim = instances[1]!;
    const busy = await clientsPerInstance('busy', BUSY_PER_INSTANCE);
    const idle = await clientsPerInstance('idle', IDLE_PER_INSTANCE);

    // Idle sessions: half ask for errors only, half for everything; then one call each, so their
    // servers have run, and they go quiet.
    const quiet = new Set<ClusterClient>();
    for (const list of idle.values()) {
      for (const [i, c] of list.entries()) {
        await c.client.setLoggingLevel(i % 2 === 0 ? 'error' : 'debug');
        if (i % 2 === 0) quiet.add(c);
        const r = await c.callLongTask({ steps: 2, intervalMs: 0 });
        expect(r.content).toEqual([{ type: 'text', text: 'completed 2 steps' }]);
        expect(c.steps).toEqual(quiet.has(c) ? [] : [1, 2]);
      }
    }

    // Busy sessions: a long polling call each; the crash comes once every call is a few steps in.
    const started = new Counter();
    const outcomes = new Map<ClusterClient, { result?: unknown; error?: unknown; at: number }>();
    const calls = [...busy.values()].flat().map((c) => {
      let counted = false;
      const p = c.callLongTask(LONG, {
        onprogress: (step) => {
          if (step >= LONG.closeEvery! + 1 && !counted) {
            counted = true;
            started.add();
          }
        },
      });
      return p.then(
        (result) => outcomes.set(c, { result, at: Date.now() }),
        (error: unknown) => outcomes.set(c, { error, at: Date.now() }),
      );
    });
    await started.reach(calls.length);
    const killedAt = Date.now();
    await victim.stop('SIGKILL');

    // Idle sessions of the dead instance, asked at once: each request waits until the dead owner's
    // heartbeat expired (never a 502), then the session is restored where it landed, with the
    // client's capabilities (sampling asks the client) and log level (long_task's info logs are
    // filtered for the sessions that asked for errors only).
    const idleMs: number[] = [];
    const idleChecks = idle.get(victim.name)!.map(async (c) => {
      const sampled = await c.client.callTool({ name: 'test_sampling', arguments: { prompt: `still ${c.name}?` } });
      idleMs.push(Date.now() - killedAt);
      expect(sampled.content).toEqual([{ type: 'text', text: `LLM response: echo: still ${c.name}?` }]);
      const r = await c.callLongTask({ steps: 3, intervalMs: 0 });
      expect(r.content).toEqual([{ type: 'text', text: 'completed 3 steps' }]);
      expect(c.steps).toEqual(quiet.has(c) ? [] : [1, 2, 3]);
      expect(c.transport.sessionId).toBe(c.sessionId);
    });
    await Promise.all(calls);
    await Promise.all(idleChecks);

    // Calls on the surviving instances: every step once, in order, and the result.
    const lostCalls = [...busy].flatMap(([name, list]) => list.filter((c) => runsOn(c, name) === victim.name));
    for (const [name, list] of busy) {
      for (const c of list) {
        const outcome = outcomes.get(c)!;
        if (runsOn(c, name) === victim.name) continue;
        expect(outcome.error, `${c.name} on ${name}`).toBeUndefined();
        expect(outcome.result).toMatchObject({ content: [{ type: 'text', text: `completed ${LONG.steps} steps` }] });
        expect(c.steps).toEqual(oneTo(LONG.steps));
      }
    }
    // Calls on the dead instance: the lost-instance error, within the heartbeat window, one owner
    // check and the retry hint (plus slack for a loaded machine), and no step twice.
    const lostWithinMs: number[] = [];
    for (const c of lostCalls) {
      const outcome = outcomes.get(c)!;
      expect(outcome.error, `${c.name}: ${JSON.stringify(outcome.result)}`).toBeInstanceOf(McpError);
      const error = outcome.error as McpError;
      expect(error.code).toBe(-32603);
      expect(error.message).toMatch(/the server instance running this request was lost/);
      expect(c.steps).toEqual(oneTo(c.steps.length));
      lostWithinMs.push(outcome.at - killedAt);
    }
    const bound = HEARTBEAT_WINDOW_MS + OWNER_CHECK_MS + LONG.retryMs! + 2_000;
    for (const ms of lostWithinMs) expect(ms).toBeLessThan(bound);

    // Each restored once, on a survivor, for its own client with its capabilities; nothing else moved.
    const restores = instances.flatMap((i) => restoredIn(i).map((m) => ({ on: i.name, sessionId: m[1]!, client: m[2]!, caps: m[3]! })));
    const victims = new Map(
      idle
        .get(victim.name)!
        .concat(busy.get(victim.name)!)
        .map((c) => [c.sessionId, c]),
    );
    const everyone = new Map(clients.map((c) => [c.sessionId, c]));
    for (const r of restores) {
      // Shared: any instance copies any session a request brings it, each for its own client.
      const c = SHARED ? everyone.get(r.sessionId) : victims.get(r.sessionId);
      expect(c, `restored a session the dead instance did not hold: ${JSON.stringify(r)}`).toBeDefined();
      expect(r.client).toBe(`${c!.name}/1.0.0`);
      expect(r.caps).toBe('sampling,elicitation');
      if (!SHARED) expect(r.on).not.toBe(victim.name);
    }
    const idleRestored = idle.get(victim.name)!.map((c) => restores.filter((r) => r.sessionId === c.sessionId).length);
    if (!SHARED) expect(idleRestored).toEqual(idle.get(victim.name)!.map(() => 1));
    expect(proxy.log.filter((r) => r.status === 404)).toEqual([]);

    console.log(
      `[crash] ${JSON.stringify({
        heartbeatMs: HEARTBEAT_MS,
        heartbeatWindowMs: HEARTBEAT_WINDOW_MS,
        mode: CLUSTER_MODE,
        callsSurvived: busy.size * BUSY_PER_INSTANCE - lostWithinMs.length,
        callsLost: lostWithinMs.length,
        lostErrorAfterMs: lostWithinMs,
        boundMs: bound,
        idleSessionsRestored: idleRestored.length,
        idleAnsweredAfterKillMs: idleMs,
        restores: restores.length,
      })}`,
    );
  }, 90_000);
});

describe('two instances racing to restore one session', () => {
  const title = SHARED
    ? 'shared: each instance builds its own copy and answers its own request'
    : 'one instance builds the server, the other forwards to it; both requests are answered';
  it(
    title,
    async () => {
      const { instances } = cluster;
      for (const i of instances) if (!i.alive) await i.start();
      const [owner, a, b] = instances as [Instance, Instance, Instance];
      // Sessions owned by one instance, which then drains: they are handed off, their records stay.
      const sessions = await Promise.all(Array.from({ length: 12 }, () => openSession(http(owner.url))));
      await owner.stop('SIGTERM');
      const rounds = await Promise.all(
        sessions.map(async ({ sessionId, headers }, k) => {
          // Two requests of one client in flight at once carry two ids: with one id, whichever
          // reached the winner second was refused as a duplicate (400) when the first still ran.
          const ask = async (inst: Instance, id: number) => {
            const body = { jsonrpc: '2.0', id, method: 'tools/list' };
            const res = await http(inst.url).post(body, { ...headers, accept: 'application/json, text/event-stream' });
            const text = await res.text();
            return {
              sentTo: inst.name,
              status: res.status,
              servedBy: res.headers.get('x-served-by'),
              answered: text.includes(`"id":${id}`),
            };
          };
          // Both at once, each straight to its instance.
          const [fromA, fromB] = await Promise.all([ask(a, 100 + k), ask(b, 200 + k)]);
          return { sessionId, fromA, fromB };
        }),
      );
      await owner.start();
      const builtIn = (sessionId: string) =>
        [a, b].flatMap((i) =>
          restoredIn(i)
            .filter((m) => m[1] === sessionId)
            .map(() => i.name),
        );
      let forwarded = 0;
      let built = 0;
      for (const { sessionId, fromA, fromB } of rounds) {
        expect([fromA.status, fromB.status, fromA.answered, fromB.answered], sessionId).toEqual([200, 200, true, true]);
        built += builtIn(sessionId).length;
        forwarded += [fromA, fromB].filter((r) => r.servedBy !== r.sentTo).length;
        if (SHARED) {
          // Nobody owns it: each instance served the request it got, with a copy of its own.
          expect([fromA.servedBy, fromB.servedBy]).toEqual([a.name, b.name]);
          expect(builtIn(sessionId).sort()).toEqual([a.name, b.name]);
          continue;
        }
        // One winner served both: its own request, and the other's, which was forwarded to it.
        expect(fromA.servedBy).toBe(fromB.servedBy);
        expect(builtIn(sessionId)).toEqual([fromA.servedBy]);
      }
      expect(forwarded).toBe(SHARED ? 0 : rounds.length);
      console.log(
        `[restore race] ${JSON.stringify({
          sessions: rounds.length,
          requests: rounds.length * 2,
          serversBuilt: built,
          forwarded,
          winners: Object.fromEntries([a.name, b.name].map((n) => [n, rounds.filter((r) => r.fromA.servedBy === n).length])),
        })}`,
      );
    },
    60_000,
  );
});
