/**
 * Redis commands failing at random under three Redis-backed express-example instances: every
 * instance reaches Redis through a proxy that answers a share of the commands itself with an error
 * (appends, replays, task writes, heartbeats alike), while SDK v1 clients poll long_task with
 * closeEvery, two calls each with an idle gap between. The fault battery's audit (invariants:
 * no-hole, stored-before-sent): never
 * a partial replay (each step once, in order, or the call ends with an error), never a lost answer
 * that was acknowledged, never a 500.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { instance, roundRobinProxy, type Instance, type RoundRobinProxy } from '@mcp-kit/testbed/cluster';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';
import { freePort } from '@mcp-kit/testbed/processes';
import { startRespFaultProxy, type RespFaultProxy } from '@mcp-kit/testbed/resp-faults';
import { connectClient, type ClusterClient } from '@mcp-kit/testbed/clients';
import { oneTo, type LongTask } from '@mcp-kit/testbed/long-task';
import { seedFor } from '@mcp-kit/testbed/random';
import { auditRawChaos, describeRawChaos, RawChaosClient } from '../support/raw-chaos.js';

const LONG = process.env.LONG === '1';
const CLIENTS = LONG ? 30 : 9;
const RAW_CLIENTS = LONG ? 10 : 3;
const ROUNDS = LONG ? 6 : 2; // test:chaos runs 10× the calls of CI
const FAIL_RATE = Number(process.env.FAIL_RATE ?? 0.02);
const TASK: LongTask = { steps: 16, intervalMs: 60, closeEvery: 4, retryMs: 150 };
const ENV = { HEARTBEAT_MS: '500', RETRY_MS: '200', DRAIN_MS: '10000' };

let redis: TestRedis;
let faults: RespFaultProxy;
let instances: Instance[] = [];
let proxy: RoundRobinProxy;
const clients: ClusterClient[] = [];
const raw: RawChaosClient[] = [];

beforeAll(async () => {
  redis = await startRedis();
  faults = await startRespFaultProxy(redis.port, 20);
  for (let i = 0; i < 3; i++) instances.push(instance(`node-${i}`, await freePort(), { ...ENV, REDIS_URL: faults.url }));
  await Promise.all(instances.map((i) => i.start()));
  proxy = await roundRobinProxy(instances.map((i) => i.port));
}, 60_000);

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await Promise.all(raw.map((c) => c.close()));
  await proxy?.close();
  for (const i of instances) await i.stop('SIGKILL');
  instances = [];
  await faults?.close();
  await redis?.stop();
});

/** What a call ended with: its steps and result, or its error. */
interface Outcome {
  client: string;
  round: number;
  steps: number[];
  result?: unknown;
  error?: string;
}

describe('Redis commands failing at random', () => {
  it(`${CLIENTS} clients × ${ROUNDS} calls with ${FAIL_RATE * 100}% of commands failed: each step once and in order or a clear error, no 500`, async () => {
    for (let i = 0; i < CLIENTS; i++) clients.push(await connectClient(proxy.url, `c${i}`));
    for (let i = 0; i < RAW_CLIENTS; i++) raw.push(await RawChaosClient.open(proxy.url, `raw${i}`));
    const sessions = clients.map((c) => c.sessionId);
    const from = proxy.log.length;
    faults.failRate = FAIL_RATE;
    const outcomes: Outcome[] = [];
    const seed = seedFor('command faults');
    await Promise.all([
      ...raw.map((c, i) => c.run({ ...TASK, calls: ROUNDS, seed: seed + i })),
      ...clients.map(async (c, i) => {
        for (let round = 0; round < ROUNDS; round++) {
          // Idle gaps of different lengths between calls.
          await new Promise((resolve) => setTimeout(resolve, 50 + ((i * 37 + round * 101) % 400)));
          const outcome: Outcome = { client: c.name, round, steps: [] };
          try {
            outcome.result = (await c.callLongTask(TASK, { timeoutMs: 30_000 })).content;
          } catch (error) {
            outcome.error = String(error);
          }
          outcome.steps = [...c.steps];
          outcomes.push(outcome);
        }
      }),
    ]);
    faults.failRate = 0;
    const failedCommands = [...faults.failed.entries()].map(([n, k]) => `${n} ${k}`).join(', ');
    const seenCommands = [...faults.seen.values()].reduce((a, b) => a + b, 0);
    const requests = proxy.log.slice(from);
    const statuses = new Map<number, number>();
    for (const r of requests) statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    const ok = outcomes.filter((o) => o.error === undefined).length;
    console.log(
      `[command faults] ${outcomes.length} calls: ${ok} completed, ${outcomes.length - ok} ended with an error; ` +
        `${seenCommands} Redis commands, failed: ${failedCommands}; HTTP statuses: ${[...statuses].map(([s, n]) => `${s}×${n}`).join(' ')}`,
    );
    for (const o of outcomes.filter((x) => x.error)) {
      console.log(`  ${o.client} round ${o.round}: ${o.error} after steps ${o.steps.join(',')}`);
      const session = clients.find((c) => c.name === o.client)!.sessionId;
      for (const r of requests.filter((x) => x.sessionId === session && x.status !== 200 && x.status !== 202))
        console.log(`    ${r.method} ${r.kind} ${r.lastEventId ?? ''} → ${r.status} on node-${r.backend}${r.error ? ` (${r.error})` : ''}`);
    }
    // Every call ends with its result or an error the server sent: a client that waited for its
    // own request timeout was left hanging (the server lost track of its call, or refused the
    // client's resumes until the SDK gave up on them).
    expect(outcomes.filter((o) => /timed out/i.test(o.error ?? '')).map((o) => `${o.client} round ${o.round}: ${o.error}`)).toEqual([]);

    console.log(`[command faults] ${describeRawChaos(raw)}`);
    auditRawChaos(raw, TASK.steps);
    // Never a partial replay: a call that completed heard every step once, in order; one that
    // failed heard a prefix of them, never a gap or a repeat.
    for (const o of outcomes) {
      if (o.error === undefined) {
        expect(o.result, `${o.client} round ${o.round}`).toEqual([{ type: 'text', text: `completed ${TASK.steps} steps` }]);
        expect(o.steps, `${o.client} round ${o.round}`).toEqual(oneTo(TASK.steps));
      } else {
        expect(o.steps, `${o.client} round ${o.round}: ${o.error}`).toEqual(oneTo(o.steps.length));
      }
    }
    // No 500 of any kind; 502 and 503 are the documented answers to a store that failed.
    expect([...statuses.keys()].filter((s) => s >= 500 && s !== 502 && s !== 503)).toEqual([]);
    // Faults were really injected, into appends and heartbeats among others.
    expect(faults.failed.size).toBeGreaterThan(0);
    // Every client still has its session, and it takes a call once Redis behaves.
    expect(clients.map((c) => c.transport.sessionId)).toEqual(sessions);
    for (const c of clients) {
      const r = await c.callLongTask({ steps: 2, intervalMs: 5 });
      expect(r.content).toEqual([{ type: 'text', text: 'completed 2 steps' }]);
    }
  }, 180_000);
});
