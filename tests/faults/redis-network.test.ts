/**
 * A bad network between the instances and Redis (invariant: come-back-later): three Redis-backed express-example
 * instances reach a real redis-server through packages/testbed/src/net-faults.ts, behind the round-robin
 * proxy; SDK v1 clients, SDK v2 clients (`legacy`: a 2025 session; the default negotiation, which
 * lands on 2026-07-28 and stays on its one stream) with their default settings (SDK v1: two failed
 * reconnects and they stop listening; the SDKs' 60 s request timeout) and raw chaos clients
 * (tests/support/raw-chaos.ts: cutting their own connections at random and resuming) call
 * long_task with closeEvery.
 * - Flaky: every chunk delayed by 0–300 ms (order kept) and one Redis connection reset every 3 s.
 *   Nothing is lost and no instance misses its heartbeat window: every call completes, a raw one
 *   too (a 502/503 it meets it waits out and sends again, as a client honouring it would). A new
 *   call whose POST meets a connection being made again waits for it, not a 503 "the event store
 *   is unavailable".
 * - Black hole: every byte held both ways for 10 s with nothing closed, then every connection
 *   reset. Meanwhile, probes ask each instance for things only Redis can answer (an initialize, a
 *   request on a session, a resume) and time their answers: README says a command with no reply
 *   fails after `commandTimeoutMs` (2 s) and the request gets its 503 (not four tries each
 *   waiting out the timeout on a connection that still passes for ready: 8 s). The instances miss
 *   their heartbeat window meanwhile, so a call, a raw one too, may also end with the
 *   lost-instance error.
 * The audit, as in redis-outage.test.ts: no call is left to its timeout; each completes with every
 * step once and in order, or ends with the documented error; the raw calls alike (auditRawChaos:
 * none stuck, no event gap or repeat, no status but 200/202/204/502/503); no live session hears
 * 404; no 5xx but 502/503; afterwards every session, raw ones too, takes another call. Flaky: 10
 * SDK v1, 5 SDK v2 of each negotiation and 5 raw clients × 2 calls; black hole: 4 SDK v1, 3 SDK v2
 * of each negotiation and 3 raw clients (two calls each) through 10 s. LONG=1 (`pnpm
 * test:chaos`): flaky 20, 10 + 10 and 10 clients × 4 calls; black hole 14, 8 + 8 and 8 clients
 * through 30 s.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { CLUSTER_MODE, instance, roundRobinProxy, type Instance, type RoundRobinProxy } from '@mcp-kit/testbed/cluster';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';
import { freePort } from '@mcp-kit/testbed/processes';
import { startNetFaultProxy, type NetFaultProxy } from '@mcp-kit/testbed/net-faults';
import { oneTo, type LongTask } from '@mcp-kit/testbed/long-task';
import { RawSession, RawSse } from '@mcp-kit/testbed/raw-client';
import { callTool, LEGACY } from '@mcp-kit/testbed/requests';
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
// The example apps' own heartbeat (2 s: an instance counts as gone 6 s after its last beat), as a
// new user runs them: a network this bad must not make a live instance pass for gone.
const ENV = { RETRY_MS: '200' };
const TASK: LongTask = { steps: 30, intervalMs: 100, closeEvery: 5, retryMs: 700 };
/** The redis package's default `commandTimeoutMs` (the example apps keep it). */
const COMMAND_TIMEOUT_MS = 2_000;
/**
 * The documented error of a call whose instance counted as gone (no heartbeat through for 6 s: a
 * black hole longer than that) and whose session a peer took over: the only way a call here may
 * end without its result. Nothing in Redis is lost, so never the lost-events error.
 */
const INSTANCE_LOST = /server instance running this request was lost/;

/** The SDK clients by kind (see @mcp-kit/testbed/clients), the raw chaos clients beside them, and the calls each makes. */
interface Scenario {
  clients: Partial<Record<OutageKind, number>>;
  raw: number;
}
const FLAKY: Scenario & { rounds: number } = LONG
  ? { clients: { v1: 20, 'v2-legacy': 10, 'v2-auto': 10 }, raw: 10, rounds: 4 }
  : { clients: { v1: 10, 'v2-legacy': 5, 'v2-auto': 5 }, raw: 5, rounds: 2 };
const BLACK_HOLE: Scenario & { holdMs: number } = LONG
  ? { clients: { v1: 14, 'v2-legacy': 8, 'v2-auto': 8 }, raw: 8, holdMs: 30_000 }
  : { clients: { v1: 4, 'v2-legacy': 3, 'v2-auto': 3 }, raw: 3, holdMs: 10_000 };
const count = (s: Scenario) => `${Object.values(s.clients).reduce((a, n) => a + n, 0)} SDK and ${s.raw} raw clients`;

let redis: TestRedis | undefined;
let net: NetFaultProxy | undefined;
let instances: Instance[] = [];
let proxy: RoundRobinProxy | undefined;
let clients: OutageClient[] = [];
let raw: RawChaosClient[] = [];

afterEach(async () => {
  net?.resetEvery(0);
  await Promise.all(clients.map((c) => c.close()));
  clients = [];
  await Promise.all(raw.map((c) => c.close()));
  raw = [];
  await proxy?.close();
  for (const i of instances) await i.stop('SIGKILL');
  instances = [];
  await net?.close();
  await redis?.stop();
  proxy = undefined;
  net = undefined;
  redis = undefined;
});

async function startAll(seed: number): Promise<{ net: NetFaultProxy; proxy: RoundRobinProxy; instances: Instance[] }> {
  redis = await startRedis();
  net = await startNetFaultProxy(redis.port, seed);
  for (let i = 0; i < 3; i++) instances.push(instance(`node-${i}`, await freePort(), { ...ENV, REDIS_URL: net.url }));
  await Promise.all(instances.map((i) => i.start()));
  proxy = await roundRobinProxy(instances.map((i) => i.port));
  return { net, proxy, instances };
}

/** Connects the scenario's SDK clients and raw chaos clients. */
async function connectAll(url: string, scenario: Scenario): Promise<void> {
  await connectOutageClients(url, scenario.clients, clients);
  for (let i = 0; i < scenario.raw; i++) raw.push(await RawChaosClient.open(url, `raw${i}`));
}

/** One call as a client saw it. */
interface Outcome {
  client: OutageClient;
  round: number;
  steps: number[];
  ms: number;
  result?: unknown;
  error?: string;
}

async function call(c: OutageClient, round: number): Promise<Outcome> {
  const started = Date.now();
  try {
    const result = await c.call(TASK);
    return { client: c, round, steps: [...c.steps], ms: Date.now() - started, result };
  } catch (error) {
    return { client: c, round, steps: [...c.steps], ms: Date.now() - started, error: String(error) };
  }
}

/**
 * The audit every scenario ends with, of the SDK calls' `outcomes` and the raw chaos clients' calls;
 * `from` is where its part of the proxy's log starts, `allowed` the error a call, a raw one too,
 * may end with instead of its result (none: every call completes).
 */
async function audit(what: string, outcomes: Outcome[], from: number, allowed?: RegExp): Promise<void> {
  const requests = proxy!.log.slice(from);
  const statuses = new Map<number, number>();
  for (const r of requests) statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
  const failed = outcomes.filter((o) => o.error !== undefined);
  const slowest = Math.max(...outcomes.map((o) => o.ms));
  console.log(
    `[${what}, ${CLUSTER_MODE}] ${outcomes.length} calls: ${outcomes.length - failed.length} completed, ${failed.length} ended otherwise; ` +
      `slowest ${slowest} ms; statuses ${[...statuses].map(([st, n]) => `${st}×${n}`).join(' ')}; Redis connections ${net!.stats.connections}, resets ${net!.stats.resets}`,
  );
  const timeline = (c: OutageClient) => timelineOf(requests, c);
  for (const o of failed)
    console.log(`  ${o.client.name}#${o.round}: ${o.error} after ${o.ms} ms, steps ${o.steps.join(',')}\n    ${timeline(o.client)}`);
  const rawEnded = raw.flatMap((c) => c.outcomes).filter((o) => o.result === undefined);
  console.log(`  ${describeRawChaos(raw)}`);
  for (const o of rawEnded) console.log(`  ${o.client} call ${o.call}: ${o.stuck ?? JSON.stringify(o.error)}, steps ${o.steps.join(',')}`);
  for (const o of outcomes) {
    const name = `${o.client.name}#${o.round}`;
    if (o.error === undefined) {
      expect(o.result, name).toEqual([{ type: 'text', text: `completed ${TASK.steps} steps` }]);
      expect(o.steps, name).toEqual(oneTo(TASK.steps));
    } else {
      const why = `${name}: ${o.error} after ${o.ms} ms; ${timeline(o.client)}\n${outputs()}`;
      expect(o.error, why).not.toMatch(/timed out|-32001/i);
      expect(allowed, why).toBeDefined();
      expect(o.error, why).toMatch(allowed!);
      expect(o.steps, name).toEqual(oneTo(o.steps.length));
    }
  }
  auditRawChaos(raw, TASK.steps, () => allowed !== undefined);
  for (const o of rawEnded) expect(o.error?.message, `${o.client} call ${o.call}\n${outputs()}`).toMatch(allowed!);
  expect([...statuses.keys()].filter((st) => st >= 500 && st !== 502 && st !== 503)).toEqual([]);
  expect(requests.filter((r) => r.status === 404)).toEqual([]);
}

function outputs(): string {
  return instances.map((i) => `--- ${i.name} ---\n${i.output.slice(-3_000)}`).join('\n');
}

/** Afterwards, with the network healed, every session takes another call. */
async function everySessionServes(): Promise<void> {
  for (const c of clients)
    expect(await c.call({ steps: 3, intervalMs: 10 }), c.name).toEqual([{ type: 'text', text: 'completed 3 steps' }]);
  for (const c of raw) expect(await rawCallAgain(c), c.name).toEqual([{ type: 'text', text: 'completed 3 steps' }]);
}

describe('a network to Redis that delays chunks by 0–300 ms and resets one connection every 3 s', () => {
  it(`${count(FLAKY)} × ${FLAKY.rounds} calls: none waits for its timeout; each completes with every step once and in order`, async () => {
    const seed = seedFor('redis network, flaky');
    const { net, proxy } = await startAll(seed);
    await connectAll(proxy.url, FLAKY);
    const from = proxy.log.length;
    net.delayMs = 300;
    net.resetEvery(3_000);
    const rawRuns = raw.map((c, i) => c.run({ ...TASK, calls: FLAKY.rounds, seed: seed + 1 + i, callDeadlineMs: CLIENT_TIMEOUT_MS }));
    const outcomes = (
      await Promise.all(
        clients.map(async (c, i) => {
          const mine: Outcome[] = [];
          for (let round = 0; round < FLAKY.rounds; round++) {
            await new Promise((resolve) => setTimeout(resolve, (i * 37 + round * 101) % 400));
            mine.push(await call(c, round));
          }
          return mine;
        }),
      )
    ).flat();
    await Promise.all(rawRuns);
    net.resetEvery(0);
    net.delayMs = 0;
    const lines = instances.flatMap((i) => i.output.split('\n').filter((l) => /mcp-kit|Error/.test(l)));
    console.log(
      `[flaky] instance error lines: ${lines.length}\n${[...new Set(lines.map((l) => l.slice(0, 200)))].slice(0, 12).join('\n')}`,
    );
    await audit('flaky network', outcomes, from);
    await everySessionServes();
  }, 180_000);
});

/** How long one request took to be answered in full, and with what. */
interface Probe {
  what: string;
  status: number;
  ms: number;
}

/** Sends `init` to `url` and waits for the whole answer (an SSE answer included). */
async function probe(what: string, url: string, init: { method: string; headers: Record<string, string>; body?: string }): Promise<Probe> {
  const started = Date.now();
  try {
    const sse = await RawSse.open(url, init);
    await sse.end(60_000);
    return { what, status: sse.status, ms: Date.now() - started };
  } catch (error) {
    return { what: `${what} (${String(error).slice(0, 80)})`, status: 0, ms: Date.now() - started };
  }
}

describe('a network to Redis that black-holes every byte, then resets', () => {
  it(`${BLACK_HOLE.holdMs} ms with ${count(BLACK_HOLE)} away: none waits for its timeout; a request Redis does not answer hears its 503 after commandTimeoutMs`, async () => {
    const seed = seedFor('redis network, black hole');
    const { net, proxy, instances } = await startAll(seed);
    await connectAll(proxy.url, BLACK_HOLE);
    // A session of its own for the probes (on node-0), with a finished call to resume from.
    const session = await RawSession.open(instances[0]!.url);
    const done = await session.postSse(callTool(1, 'long_task', { steps: 1, intervalMs: 0 }));
    await done.end();
    const cursor = done.lastEventId!;
    const from = proxy.log.length;
    const rawRuns = raw.map((c, i) => c.run({ ...TASK, calls: 2, seed: seed + 1 + i, callDeadlineMs: CLIENT_TIMEOUT_MS }));
    const calls = clients.map((c) => call(c, 0));
    // Every 2025 SDK client was just sent away after step 5 (closeEvery 5): the network goes while
    // they poll (a 2026-07-28 one, which stays on its stream, has heard step 5 on it).
    await stepsReached(clients, 5);
    const hole = net.blackHole(BLACK_HOLE.holdMs);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const json = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': LEGACY };
    const inSession = { 'mcp-session-id': session.sessionId, 'mcp-protocol-version': LEGACY };
    const probes = await Promise.all(
      instances.flatMap((inst) => [
        probe(`initialize at ${inst.name}`, inst.url, {
          method: 'POST',
          headers: json,
          body: JSON.stringify({
            jsonrpc: '2.0',
            id: 0,
            method: 'initialize',
            params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'probe', version: '1' } },
          }),
        }),
        probe(`ping at ${inst.name}`, inst.url, {
          method: 'POST',
          headers: { ...json, ...inSession },
          body: JSON.stringify({ jsonrpc: '2.0', id: `ping-${inst.name}`, method: 'ping' }),
        }),
        probe(`resume at ${inst.name}`, inst.url, {
          method: 'GET',
          headers: { accept: 'text/event-stream', ...inSession, 'last-event-id': cursor },
        }),
      ]),
    );
    const heldStill = net.holding;
    console.log(
      `[black hole ${BLACK_HOLE.holdMs} ms, ${CLUSTER_MODE}] answers while Redis did not answer (held still: ${heldStill}):\n` +
        probes.map((p) => `  ${p.what}: ${p.status} after ${p.ms} ms`).join('\n'),
    );
    await hole;
    const outcomes = await Promise.all(calls);
    await Promise.all(rawRuns);
    await audit(`black hole ${BLACK_HOLE.holdMs} ms`, outcomes, from, INSTANCE_LOST);
    // README: a command with no reply fails after commandTimeoutMs and the request gets its answer
    // (503, or a resume's come-back-later 200) then, not several timeouts later.
    for (const p of probes) {
      expect(p.ms, `${p.what}: ${p.status}`).toBeLessThan(COMMAND_TIMEOUT_MS + 1_000);
      expect([200, 503], p.what).toContain(p.status);
    }
    await everySessionServes();
  }, 180_000);
});
