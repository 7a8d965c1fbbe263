/**
 * Redis gone for a while, not a blip (issue 27): three Redis-backed express-example instances
 * behind the round-robin proxy, SDK v1 clients with their default settings (two failed reconnects
 * and they stop listening) polling long_task with closeEvery, and Redis stopped for 1 s or 5 s
 * (30 s under LONG=1, `pnpm test:chaos`) while every call is away, then started again, empty or
 * with its append-only file. Whatever the outage, no call is left to its client's timeout: each
 * completes with every step once and in order, or (Redis came back empty) ends with the
 * lost-events error; no live session hears 404 and no status but 502/503 is a 5xx.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { connectClient, oneTo, stepsReached, type ClusterClient, type LongTask } from '../cluster/clients.js';

const ENV = { HEARTBEAT_MS: '500', RETRY_MS: '200', DRAIN_MS: '10000' };
const CLIENTS = process.env.LONG === '1' ? 30 : 6;
const LONG: LongTask = { steps: 30, intervalMs: 100, closeEvery: 5, retryMs: 700 };
/** The SDK's own default request timeout: a call still unanswered then was left to it. */
const CLIENT_TIMEOUT_MS = 60_000;

const OUTAGES =
  process.env.LONG === '1'
    ? [
        { downMs: 5_000, aof: true },
        { downMs: 30_000, aof: true },
        { downMs: 30_000, aof: false },
      ]
    : [
        { downMs: 1_000, aof: true },
        { downMs: 5_000, aof: true },
        { downMs: 5_000, aof: false },
      ];

let cluster: TestCluster | undefined;
let clients: ClusterClient[] = [];
let dir: string | undefined;

afterEach(async () => {
  await Promise.all(clients.map((c) => c.close()));
  clients = [];
  await cluster?.close();
  cluster = undefined;
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

describe.each(OUTAGES)('Redis down for $downMs ms (append-only file: $aof)', ({ downMs, aof }) => {
  it('no call waits for its timeout: each completes with every step once and in order, or ends with the lost-events error', async () => {
    if (aof) dir = mkdtempSync(join(tmpdir(), 'mcp-kit-aof-'));
    cluster = await startCluster(3, ENV, 'express-example', dir ? { aofDir: dir } : {});
    for (let i = 0; i < CLIENTS; i++) clients.push(await connectClient(cluster.proxy.url, `c${i}`));
    const started = Date.now();
    const calls = clients.map((c) =>
      c.callLongTask(LONG, { timeoutMs: CLIENT_TIMEOUT_MS }).then(
        (result) => ({ result, ms: Date.now() - started }),
        (error: unknown) => Promise.reject(Object.assign(new Error(String(error)), { ms: Date.now() - started })),
      ),
    );
    // Every client was just sent away after step 5 (closeEvery 5): Redis goes while they poll.
    await stepsReached(clients, 5);
    const from = cluster.proxy.log.length;
    await cluster.redis.stop();
    await new Promise((resolve) => setTimeout(resolve, downMs));
    await cluster.redis.start();
    const results = await Promise.allSettled(calls);
    const requests = cluster.proxy.log.slice(from);
    const statuses = new Map<number, number>();
    for (const r of requests) statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    const lost = results.filter((r) => r.status === 'rejected').length;
    console.log(
      `[redis down ${downMs} ms, ${aof ? 'AOF' : 'empty'}] ${CLIENTS} calls: ${CLIENTS - lost} completed, ${lost} ended otherwise; ` +
        `statuses since the stop: ${[...statuses].map(([st, n]) => `${st}×${n}`).join(' ')}`,
    );
    for (const [i, r] of results.entries()) {
      const c = clients[i]!;
      if (r.status === 'fulfilled') {
        expect(r.value.result.content, c.name).toEqual([{ type: 'text', text: `completed ${LONG.steps} steps` }]);
        expect(c.steps, c.name).toEqual(oneTo(LONG.steps));
      } else {
        const why = String(r.reason);
        const timeline = requests
          .filter((q) => q.sessionId === c.sessionId)
          .map((q) => `${q.method} ${q.kind} ${q.lastEventId?.slice(-6) ?? ''} → ${q.status}`)
          .join('; ');
        // With the append-only file nothing was lost: every call must complete.
        expect(aof, `${c.name}: ${why} after steps ${c.steps.join(',')}; ${timeline}`).toBe(false);
        expect(why, `${c.name}: ${timeline}`).toContain('the event store lost this request');
        expect(c.steps, c.name).toEqual(oneTo(c.steps.length));
      }
    }
    expect([...statuses.keys()].filter((st) => st >= 500 && st !== 502 && st !== 503)).toEqual([]);
    expect(requests.filter((r) => r.status === 404)).toEqual([]);
    // Afterwards every session takes another call.
    for (const c of clients) {
      const r = await c.callLongTask({ steps: 3, intervalMs: 10 });
      expect(r.content).toEqual([{ type: 'text', text: 'completed 3 steps' }]);
    }
  }, 180_000);
});
