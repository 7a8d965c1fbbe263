/**
 * Redis restarted in the middle of running calls, under three Redis-backed express-example
 * instances behind the round-robin proxy: once empty (no persistence), once with an append-only
 * file (every acknowledged write kept). SDK v1 clients poll long_task with closeEvery and idle
 * gaps throughout; the audit at the end is the fault battery's (no-hole,
 * stored-before-sent, come-back-later).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startCluster, type TestCluster } from '@mcp-kit/testbed/cluster';
import { connectClient, stepsReached, type ClusterClient } from '@mcp-kit/testbed/clients';
import { oneTo, type LongTask } from '@mcp-kit/testbed/long-task';
import { seedFor } from '@mcp-kit/testbed/random';
import { auditRawChaos, describeRawChaos, RawChaosClient } from '../support/raw-chaos.js';

const ENV = { HEARTBEAT_MS: '500', RETRY_MS: '200', DRAIN_MS: '10000' };
// pnpm test:chaos (LONG=1) runs 10× the clients.
const CLIENTS = process.env.LONG === '1' ? 90 : 9;
const RAW_CLIENTS = process.env.LONG === '1' ? 30 : 3;
const LONG: LongTask = { steps: 30, intervalMs: 100, closeEvery: 5, retryMs: 1_500 };

let cluster: TestCluster | undefined;
let clients: ClusterClient[] = [];
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

describe.each([
  { mode: 'empty', aof: false },
  { mode: 'with its append-only file', aof: true },
])('Redis restarted $mode mid-call', ({ aof }) => {
  it('every call completes with each step once and in order, or (empty) ends with the lost-events error, never a hang; sessions go on working', async () => {
    if (aof) dir = mkdtempSync(join(tmpdir(), 'mcp-kit-aof-'));
    cluster = await startCluster(3, ENV, 'express-example', dir ? { aofDir: dir } : {});
    for (let i = 0; i < CLIENTS; i++) clients.push(await connectClient(cluster.proxy.url, `c${i}`));
    for (let i = 0; i < RAW_CLIENTS; i++) raw.push(await RawChaosClient.open(cluster.proxy.url, `raw${i}`));
    const seed = seedFor(`redis restarted ${aof ? 'with AOF' : 'empty'}`);
    // Raw chaos clients beside them: two calls each, cutting and resuming on their own.
    const rawRuns = raw.map((c, i) => c.run({ ...LONG, calls: 2, seed: seed + i }));
    const calls = clients.map((c) => c.callLongTask(LONG, { timeoutMs: 30_000 }));
    // Every client has just been sent away after step 10 (closeEvery 5) for 1.5 s: the restart
    // lands while the calls keep storing events their clients have not read yet.
    await stepsReached(clients, 10);
    // Four more steps (100 ms apart) are stored meanwhile, unread: what an empty restart loses.
    await new Promise((resolve) => setTimeout(resolve, 400));
    const from = cluster.proxy.log.length;
    await cluster.redis.stop();
    await cluster.redis.start();
    const restartedAt = Date.now();
    const results = await Promise.allSettled(calls);
    await Promise.all(rawRuns);
    const requests = cluster.proxy.log.slice(from);
    const statuses = new Map<number, number>();
    for (const r of requests) statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    const lost = results.filter((r) => r.status === 'rejected').length;
    console.log(
      `[redis restarted ${aof ? 'with AOF' : 'empty'}] ${CLIENTS} calls: ${CLIENTS - lost} completed, ${lost} ended with the lost-events error; ` +
        `HTTP statuses after the restart: ${[...statuses].map(([st, n]) => `${st}×${n}`).join(' ')}`,
    );
    // A call that ended any other way: its session's requests since the restart, to see why.
    for (const [i, r] of results.entries()) {
      if (r.status === 'rejected' && !String(r.reason).includes('the event store lost this request')) {
        const session = clients[i]!.sessionId;
        console.log(`  ${clients[i]!.name}: ${String(r.reason)} after steps ${clients[i]!.steps.join(',')}`);
        for (const q of requests.filter((x) => x.sessionId === session))
          console.log(
            `    ${q.at - restartedAt} ms ${q.method} ${q.kind} ${q.lastEventId ?? ''} → ${q.status} on node-${q.backend} (${q.servedBy})`,
          );
      }
    }
    for (const [i, r] of results.entries()) {
      const c = clients[i]!;
      if (r.status === 'fulfilled') {
        expect(r.value.content, c.name).toEqual([{ type: 'text', text: `completed ${LONG.steps} steps` }]);
        expect(c.steps, c.name).toEqual(oneTo(LONG.steps));
      } else {
        // Nothing was lost with the append-only file; without it, a call whose unread events went
        // with Redis ends at once with the error that says so (not the client's request timeout).
        expect(aof, `${c.name}: ${String(r.reason)}`).toBe(false);
        expect(String(r.reason), c.name).toContain('the event store lost this request');
        expect(c.steps, c.name).toEqual(oneTo(c.steps.length));
      }
    }
    console.log(`[redis restarted ${aof ? 'with AOF' : 'empty'}] ${describeRawChaos(raw)}`);
    auditRawChaos(raw, LONG.steps, () => !aof);
    expect([...statuses.keys()].filter((st) => st >= 500 && st !== 502 && st !== 503)).toEqual([]);
    // No live session got a 404.
    expect(requests.filter((r) => r.status === 404)).toEqual([]);
    // Afterwards every session takes another call.
    for (const c of clients) {
      const r = await c.callLongTask({ steps: 3, intervalMs: 10 });
      expect(r.content).toEqual([{ type: 'text', text: 'completed 3 steps' }]);
      expect(c.steps).toEqual(oneTo(3));
    }
  }, 120_000);
});
