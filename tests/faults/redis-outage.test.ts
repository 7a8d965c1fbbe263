/**
 * Redis gone for a while, not a blip (invariant: come-back-later): three Redis-backed express-example instances
 * behind the round-robin proxy, SDK v1 clients, SDK v2 clients (a 2025 session: `legacy`; the
 * default negotiation, which lands on 2026-07-28 and stays on its stream; and 2026-07-28 with the
 * Tasks extension's own requester, whose call becomes a task it polls with `tasks/get`) and Python SDK
 * clients (`mcp` 2.3.0, tests/clients/python_client.py, a 2025 session) with their default
 * settings (two failed reconnects and they stop listening) calling long_task with closeEvery, and
 * Redis stopped for 1, 5 or 30 s while the calls run, then started again, empty or with its
 * append-only file. Whatever the outage, no call is left to its client's timeout: each
 * completes with every step once and in order, or (Redis came back empty) ends with the
 * lost-events error; no live session hears 404 and no status but 502/503 is a 5xx.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type TestCluster } from '@mcp-kit/testbed/cluster';
import { oneTo, type LongTask } from '@mcp-kit/testbed/long-task';
import {
  CLIENT_TIMEOUT_MS,
  connectOutageClients,
  isTaskClient,
  stepsReached,
  timelineOf,
  type OutageClient,
} from '@mcp-kit/testbed/clients';
import { pythonVenv, runPythonJson } from '@mcp-kit/testbed/python';
import { seedFor } from '@mcp-kit/testbed/random';
import { auditRawChaos, describeRawChaos, RawChaosClient } from '../support/raw-chaos.js';

const ENV = { HEARTBEAT_MS: '500', RETRY_MS: '200', DRAIN_MS: '10000' };
const CLIENTS = process.env.LONG === '1' ? 30 : 6; // of each kind
/** Raw chaos clients beside them (tests/support/raw-chaos.ts): two calls each, cutting and resuming on their own. */
const RAW_CLIENTS = process.env.LONG === '1' ? 10 : 3;
const LONG: LongTask = { steps: 30, intervalMs: 100, closeEvery: 5, retryMs: 700 };

const OUTAGES =
  process.env.LONG === '1'
    ? [
        { downMs: 5_000, aof: true },
        { downMs: 30_000, aof: true },
        { downMs: 30_000, aof: false },
      ]
    : [
        { downMs: 1_000, aof: true },
        { downMs: 1_000, aof: false },
        { downMs: 5_000, aof: true },
        { downMs: 5_000, aof: false },
        { downMs: 30_000, aof: true },
      ];

/** The Python client (tests/clients/python_client.py), a 2025 session polling a longer long_task. */
const PYTHON_SCRIPT = fileURLToPath(new URL('../clients/python_client.py', import.meta.url));
const PYTHON_RUNS = 2;
const PYTHON_TASK: LongTask = { steps: 60, intervalMs: 100, closeEvery: 5, retryMs: 700 };
interface PythonRun {
  longTask?: { content: unknown[] };
  logSteps: number[];
  error?: string;
}
let python: string;
beforeAll(async () => {
  python = await pythonVenv('mcp-2.3.0', ['mcp==2.3.0']);
}, 300_000);

let cluster: TestCluster | undefined;
let clients: OutageClient[] = [];
let raw: RawChaosClient[] = [];
let dir: string | undefined;

afterEach(async () => {
  await Promise.all(clients.map((c) => c.close()));
  clients = [];
  await Promise.all(raw.map((c) => c.close()));
  raw = [];
  await cluster?.close();
  cluster = undefined;
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

describe.each(OUTAGES)('Redis down for $downMs ms (append-only file: $aof)', ({ downMs, aof }) => {
  it('no call waits for its timeout: each completes with every step once and in order, or ends with the lost-events error', async () => {
    if (aof) dir = mkdtempSync(join(tmpdir(), 'mcp-kit-aof-'));
    cluster = await startCluster(3, ENV, 'express-example', dir ? { aofDir: dir } : {});
    const url = cluster.proxy.url;
    // The Python clients first (one interpreter for all): their long_task is running by the time
    // the others start (each made two tools/call requests: test_simple_text, then long_task).
    const plan = {
      timeoutS: 90,
      targets: [{ key: 'outage', url, runs: Array.from({ length: PYTHON_RUNS }, () => ({ mode: 'legacy', longTask: PYTHON_TASK })) }],
    };
    const pythonRuns = runPythonJson<Record<string, PythonRun[]>>(python, PYTHON_SCRIPT, [JSON.stringify(plan)], 150_000);
    pythonRuns.catch(() => {});
    const pythonStart = Date.now() + 60_000;
    while (cluster.proxy.log.filter((r) => r.kind === 'request:tools/call').length < 2 * PYTHON_RUNS) {
      if (Date.now() > pythonStart) throw new Error('the Python clients did not call long_task within 60 s');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await connectOutageClients(url, { v1: CLIENTS, 'v2-legacy': CLIENTS, 'v2-auto': CLIENTS, tasks: CLIENTS }, clients);
    for (let i = 0; i < RAW_CLIENTS; i++) raw.push(await RawChaosClient.open(url, `raw${i}`));
    const seed = seedFor(`redis down ${downMs} ms ${aof ? 'AOF' : 'empty'}`);
    const rawRuns = raw.map((c, i) => c.run({ ...LONG, calls: 2, seed: seed + i, callDeadlineMs: CLIENT_TIMEOUT_MS }));
    const calls = clients.map((c) => c.call(LONG));
    // Settled below, once Redis is back; one that fails meanwhile is no unhandled rejection.
    for (const call of calls) call.catch(() => {});
    // Every client was just sent away after step 5 (closeEvery 5): Redis goes while they poll.
    await stepsReached(clients, 5);
    const from = cluster.proxy.log.length;
    await cluster.redis.stop();
    await new Promise((resolve) => setTimeout(resolve, downMs));
    await cluster.redis.start();
    const results = await Promise.allSettled(calls);
    await Promise.all(rawRuns);
    const requests = cluster.proxy.log.slice(from);
    const statuses = new Map<number, number>();
    for (const r of requests) statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    const lost = results.filter((r) => r.status === 'rejected').length;
    console.log(
      `[redis down ${downMs} ms, ${aof ? 'AOF' : 'empty'}] ${clients.length} calls: ${clients.length - lost} completed, ${lost} ended otherwise; ` +
        `statuses since the stop: ${[...statuses].map(([st, n]) => `${st}×${n}`).join(' ')}`,
    );
    for (const [i, r] of results.entries()) {
      const c = clients[i]!;
      if (r.status === 'fulfilled') {
        expect(r.value, c.name).toEqual([{ type: 'text', text: `completed ${LONG.steps} steps` }]);
        // A task reports its progress as a statusMessage, throttled: the steps it named, in order, ending with the last.
        if (isTaskClient(c)) expect(c.steps.at(-1), c.name).toBe(LONG.steps);
        else expect(c.steps, c.name).toEqual(oneTo(LONG.steps));
      } else if (isTaskClient(c)) {
        // Redis came back empty: the task's record is gone with it, and tasks/get says so.
        expect(aof, `${c.name}: ${String(r.reason)}`).toBe(false);
        expect(String(r.reason), c.name).toMatch(/Task not found/);
      } else {
        const why = String(r.reason);
        const timeline = timelineOf(requests, c);
        // With the append-only file nothing was lost: every call must complete.
        expect(aof, `${c.name}: ${why} after steps ${c.steps.join(',')}; ${timeline}`).toBe(false);
        expect(why, `${c.name}: ${timeline}`).toContain('the event store lost this request');
        expect(c.steps, c.name).toEqual(oneTo(c.steps.length));
      }
    }
    for (const [i, run] of (await pythonRuns).outage!.entries()) {
      const name = `python-${i}`;
      if (run.error === undefined) {
        expect(run.longTask?.content, name).toEqual([{ type: 'text', text: `completed ${PYTHON_TASK.steps} steps` }]);
        expect(run.logSteps, name).toEqual(oneTo(PYTHON_TASK.steps));
      } else {
        expect(aof, `${name}: ${run.error}`).toBe(false);
        expect(run.error, name).toContain('the event store lost this request');
        expect(run.logSteps, name).toEqual(oneTo(run.logSteps.length));
      }
    }
    console.log(`[redis down ${downMs} ms, ${aof ? 'AOF' : 'empty'}] ${describeRawChaos(raw)}`);
    // With the append-only file nothing was lost: every raw call completes too.
    auditRawChaos(raw, LONG.steps, () => !aof);
    expect([...statuses.keys()].filter((st) => st >= 500 && st !== 502 && st !== 503)).toEqual([]);
    expect(requests.filter((r) => r.status === 404)).toEqual([]);
    // Afterwards every session takes another call.
    for (const c of clients) {
      expect(await c.call({ steps: 3, intervalMs: 10 }), c.name).toEqual([{ type: 'text', text: 'completed 3 steps' }]);
    }
  }, 180_000);
});
