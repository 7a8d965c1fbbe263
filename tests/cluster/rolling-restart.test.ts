/**
 * A rolling deploy of a Redis-backed cluster: three built express-example instances behind the
 * round-robin proxy, one real redis-server, and many SDK v1 clients that keep running `long_task`
 * with `closeEvery` (SEP-1699 polling) and idle gaps between calls. Each instance in turn gets
 * SIGTERM, drains (idle sessions handed off, running calls finished, polling clients sent to the
 * other instances) and is started again, while the clients keep going. Nothing may be lost: every
 * call completes, every step arrives once and in order, no 404, no client starts a new session.
 *
 * CLUSTER_CLIENTS sets the number of clients (see CLIENTS below). MCP_KIT_CLUSTER=shared runs it in
 * a shared cluster (no internalUrl), where the proxy takes an instance out of rotation
 * before its SIGTERM, since a draining instance has no peer to hand requests over to.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { count, Rng, seedFor } from '@mcp-kit/testbed/random';
import { CLUSTER_MODE, startCluster, type TestCluster } from '@mcp-kit/testbed/cluster';
import { connectClient, Counter, type ClusterClient } from '@mcp-kit/testbed/clients';
import { oneTo, type LongTask } from '@mcp-kit/testbed/long-task';

// 200 in CI (the issue's number; ~50 s on 2 cores). Under LONG=1 (`pnpm test:chaos`) 300: one
// Node process drives every SDK client and the proxy, and at 500 on 2 cores that process falls so
// far behind that first calls pass the SDK's 60 s request timeout.
const CLIENTS = count(200, 300, 'CLUSTER_CLIENTS');
const TASK: LongTask = { steps: 6, intervalMs: 150, closeEvery: 2, retryMs: 150 };
/** Idle gap between a client's calls, in ms. */
const GAP = { min: 50, max: 600 };
// A heartbeat window (three beats) of 3 s: at 500 ms, under twelve busy loops on 2 cores, an
// instance whose event loop lagged 1.5 s was taken for lost, and its calls ended with that error.
const ENV = { HEARTBEAT_MS: '1000', DRAIN_MS: '20000', RETRY_MS: '250' };
/** SIGTERM to exit: the drain deadline, then closing. */
const DRAIN_EXIT_MS = Number(ENV.DRAIN_MS) + 10_000;

let cluster: TestCluster;
let clients: ClusterClient[] = [];
const SHARED = CLUSTER_MODE === 'shared';

beforeAll(async () => {
  cluster = await startCluster(3, ENV);
}, 60_000);

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await cluster?.close();
});

/** Connects `n` clients through the proxy, a batch at a time (a burst of initializes is not what this tests). */
async function connectAll(n: number): Promise<ClusterClient[]> {
  const all: ClusterClient[] = [];
  for (let i = 0; i < n; i += 25) {
    const batch = Array.from({ length: Math.min(25, n - i) }, (_, j) => connectClient(cluster.proxy.url, `client-${i + j}`));
    all.push(...(await Promise.all(batch)));
  }
  return all;
}

interface Restart {
  name: string;
  /** What the instance reported: from SIGTERM to drain() resolved. */
  drainMs: number;
  /** From SIGTERM to the process's exit. */
  exitMs: number;
  /** Sessions restored (on any instance) from its SIGTERM until it listened again. */
  restored: number;
  /** Sessions it took over itself after its SIGTERM (it should hand them on instead). */
  restoredWhileDraining: number;
  /** Whether connections outlived the drain by CLOSE_GRACE_MS, so the app's close() ended them. */
  graceClosed: boolean;
  /** Calls running (on any instance) when it got SIGTERM. */
  callsRunning: number;
  /** ms since the clients connected: SIGTERM, exit, listening again. */
  at: [number, number, number];
}

/** Rejects with `what` if `promise` has not settled within `ms`. */
async function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}\n${cluster.outputs()}`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

const countBy = (items: string[]) => Object.fromEntries([...new Set(items)].map((k) => [k, items.filter((i) => i === k).length]));

const restoredLines = (output: string) =>
  [...output.matchAll(/restored session (\S+) for (\S+)/g)].map((m) => ({ sessionId: m[1]!, client: m[2]! }));

describe('rolling restart of three Redis-backed instances', () => {
  it(`${CLIENTS} SDK clients keep calling long_task while each instance drains and restarts: nothing lost`, async () => {
    const rng = new Rng(seedFor('rolling restart'));
    const started = Date.now();
    clients = await connectAll(CLIENTS);
    const connectedMs = Date.now() - started;
    const { proxy, instances } = cluster;
    expect(proxy.log.filter((r) => r.kind === 'initialize').length).toBe(CLIENTS);

    const calls = new Counter();
    const running = new Set<ClusterClient>();
    const failures: string[] = [];
    let events = 0;
    let rolling = true;
    const drive = async (c: ClusterClient) => {
      for (;;) {
        const last = !rolling;
        running.add(c);
        try {
          const result = await c.callLongTask(TASK);
          const text = (result.content[0] as { text?: string } | undefined)?.text;
          if (text !== `completed ${TASK.steps} steps`) failures.push(`${c.name}: result ${JSON.stringify(result)}`);
          if (JSON.stringify(c.steps) !== JSON.stringify(oneTo(TASK.steps))) failures.push(`${c.name}: steps ${JSON.stringify(c.steps)}`);
          events += c.steps.length;
        } catch (error) {
          // fetch's "fetch failed" says what broke only in its cause (a reset, a closed socket).
          const cause = (error as Error).cause as { code?: string; message?: string } | undefined;
          failures.push(`${c.name}: ${(error as Error).message}${cause ? ` (${cause.code ?? ''} ${cause.message ?? ''})` : ''}`);
        } finally {
          running.delete(c);
        }
        calls.add();
        if (last) return;
        await new Promise((resolve) => setTimeout(resolve, rng.int(GAP.min, GAP.max)));
      }
    };
    const drivers = clients.map(drive);

    const restarts: Restart[] = [];
    const rollStarted = Date.now();
    for (const [index, inst] of instances.entries()) {
      // Enough traffic between restarts that every instance holds sessions and running calls.
      await within(60_000, `${CLIENTS} more calls`, calls.reach(calls.value + CLIENTS));
      const before = new Set(instances.flatMap((i) => restoredLines(i.output).map((r) => r.sessionId)));
      const callsRunning = [...running].length;
      const t0 = Date.now();
      // Shared (no internalUrl): a draining instance cannot hand a request over; the load balancer
      // takes it out of rotation first, as a readiness probe or the platform does.
      // It waits for the requests already on their way there (as a deregistration delay does):
      // one that reached the instance after its drain had begun ran on an instance about to exit.
      if (SHARED) {
        proxy.setDown(index, true);
        await within(10_000, `the requests on their way to ${inst.name}`, proxy.settled(index));
      }
      await within(DRAIN_EXIT_MS, `${inst.name} to exit after SIGTERM`, inst.stop('SIGTERM'));
      const exitMs = Date.now() - t0;
      const drainMs = Number(/drained in (\d+) ms/.exec(inst.runOutput)?.[1] ?? NaN);
      const restoredWhileDraining = restoredLines(inst.runOutput.slice(inst.runOutput.indexOf('draining (deadline'))).length;
      await inst.start();
      if (SHARED) proxy.setDown(index, false);
      const after = instances.flatMap((i) => restoredLines(i.output).map((r) => r.sessionId));
      const at: Restart['at'] = [t0 - started, t0 + exitMs - started, Date.now() - started];
      const restored = after.filter((s) => !before.has(s)).length;
      const graceClosed = inst.runOutput.includes('connections still open');
      restarts.push({ name: inst.name, drainMs, exitMs, restored, restoredWhileDraining, graceClosed, callsRunning, at });
    }
    const rollMs = Date.now() - rollStarted;
    rolling = false;
    await within(90_000, 'every client to finish its last call', Promise.all(drivers));

    const log = proxy.log;
    const byStatus = new Map<number, number>();
    for (const r of log) byStatus.set(r.status, (byStatus.get(r.status) ?? 0) + 1);
    const restores = instances.flatMap((i) => restoredLines(i.output));
    const movedSessions = new Set(restores.map((r) => r.sessionId));
    const reinitialized = clients.filter((c) => c.transport.sessionId !== c.sessionId);
    const figures = {
      clients: CLIENTS,
      calls: calls.value,
      events,
      requests: log.length,
      resumes: log.filter((r) => r.method === 'GET' && r.lastEventId).length,
      servedElsewhere: log.filter((r) => r.servedBy !== undefined && r.servedBy !== instances[r.backend]!.name).length,
      statuses: Object.fromEntries([...byStatus].sort(([a], [b]) => a - b)),
      restores: restores.length,
      sessionsMoved: movedSessions.size,
      restarts,
      connectMs: connectedMs,
      rollingRestartMs: rollMs,
      totalMs: Date.now() - started,
      transportErrors: clients.reduce((n, c) => n + c.errors.length, 0),
      transportErrorKinds: countBy(
        clients.flatMap((c) => c.errors.map((e) => e.message.replace(/[0-9a-zA-Z_-]{22}(\.\d+)?/g, '…').slice(0, 120))),
      ),
    };
    console.log(`[rolling restart] ${JSON.stringify(figures, null, 2)}`);
    const refused = log.filter((r) => r.status >= 400).map((r) => ({ ...r, at: r.at - started, backend: instances[r.backend]!.name }));
    if (refused.length > 0) console.log(`[rolling restart] refused requests: ${JSON.stringify(refused.slice(0, 40), null, 1)}`);

    if (failures.length > 0) {
      // What the proxy saw of (up to ten of) the failed clients' sessions, a line a request: when
      // it came and when its answer's head did (ms since the clients connected), or `waiting`.
      const failed = clients.filter((c) => failures.some((f) => f.startsWith(`${c.name}:`))).slice(0, 10);
      const seen = [...log, ...proxy.waiting()];
      const lines = failed.flatMap((c) => [
        `${c.name} ${c.sessionId}:`,
        ...seen
          .filter((r) => r.sessionId === c.sessionId)
          .sort((a, b) => a.receivedAt - b.receivedAt)
          .map(
            (r) =>
              `  ${r.receivedAt - started} ${r.method} ${r.kind} ${r.lastEventId ?? ''} → ${instances[r.backend]!.name} ` +
              (r.status === 0
                ? 'waiting'
                : `${r.status} by ${r.servedBy} at ${r.at - started}, ended ${r.endedAt ? r.endedAt - started : '-'}`),
          ),
      ]);
      console.log(`[rolling restart] the failed clients' requests:\n${lines.join('\n')}`);
    }
    expect(failures.slice(0, 20), cluster.outputs()).toEqual([]);
    expect(events).toBe(calls.value * TASK.steps);
    expect(log.filter((r) => r.status === 404)).toEqual([]);
    // With live peers nothing is refused either: a draining instance hands requests over.
    expect(log.filter((r) => r.status >= 500)).toEqual([]);
    expect(log.filter((r) => r.kind === 'initialize').length).toBe(CLIENTS);
    expect(reinitialized.map((c) => c.name)).toEqual([]);
    // Every instance drained with calls running, within its deadline, and its sessions moved on
    // (shared: every instance holds copies of any session anyway, and a draining one serves a
    // request that raced its removal from the rotation with a copy of its own).
    for (const r of restarts) {
      expect(r.drainMs, JSON.stringify(r)).toBeLessThan(Number(ENV.DRAIN_MS));
      if (SHARED) continue;
      expect(r.restored, JSON.stringify(r)).toBeGreaterThan(0);
      expect(r.restoredWhileDraining, JSON.stringify(r)).toBe(0);
    }
    // A session restored elsewhere was restored for its own client.
    const names = new Map(clients.map((c) => [c.sessionId, c.name]));
    for (const r of restores) expect(r.client).toBe(`${names.get(r.sessionId)}/1.0.0`);
  }, 170_000);
});
