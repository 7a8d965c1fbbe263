#!/usr/bin/env node
// Three instances on one redis-server against the same three on a Redis Cluster of 3 masters (no
// replicas, as the one redis-server has none: what is compared is the masters' work), in one run on this machine:
//   node scripts/bench-redis-cluster.mjs     (after `pnpm build`; needs redis-server and redis-cli on PATH)
//
// Per Redis, two rows:
// - calls: CONCURRENCY calls in flight over IN_USE sessions (shared mode: no forwarding, so what
//   is measured is the Redis side), test_simple_text on the three instances in turn, DURATION_MS;
// - events: the same sessions calling long_task { steps: STEPS, intervalMs: 0 } on the instance
//   that made each, back to back, for DURATION_MS: every step is a log and a progress
//   notification, each one event stored in Redis before it is written to the client.
// Each row ROUNDS times, the two Redis in turn, the median shown.
// For each row: calls/s or events/s and what Redis did for them, read from every master (INFO
// commandstats and INFO cpu before and after): commands and Redis CPU per call or event, in all
// and on each master (its share). The instances and the load generator run in this process, so
// on this 2-core machine both rows are bounded by this process, not by Redis: the ratios to read
// are Redis' CPU per call and how evenly the masters share it (docs/benchmarks.md, "Redis Cluster").
import { tsImport } from 'tsx/esm/api';
import { createRedisScaleOut } from '../packages/redis/dist/index.js';
import { HEADERS, serve, session, startRedis } from './bench-support.mjs';

const DURATION_MS = Number(process.env.DURATION_MS ?? 5_000);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 12);
const STEPS = Number(process.env.STEPS ?? 200);
const SESSIONS = Number(process.env.SESSIONS ?? 3_000);
/** Sessions the workers call through, in turn: enough that their slots spread over the masters. */
const IN_USE = Number(process.env.IN_USE ?? 600);
const ROUNDS = Number(process.env.ROUNDS ?? 3);

const { startRedisCluster } = await tsImport('../packages/testbed/src/redis-cluster.ts', import.meta.url);
const { redisCommand } = await tsImport('../packages/testbed/src/redis-command.ts', import.meta.url);

/** Three instances of a shared cluster on `target` (createRedisScaleOut's `url` or `redisCluster`). */
async function instances(target) {
  const list = [];
  for (let i = 0; i < 3; i++) {
    let scaleOut;
    const served = await serve(() => {
      scaleOut = createRedisScaleOut({ ...target, mode: 'shared' });
      return { eventStore: scaleOut.eventStore, cluster: scaleOut.cluster, taskStore: scaleOut.taskStore };
    });
    await scaleOut.ready(10_000);
    list.push(served);
  }
  return list;
}

/** What each master did so far: commands executed, and CPU seconds (user + system). */
async function masterStats(ports) {
  const stats = [];
  for (const port of ports) {
    const commands = String(await redisCommand(port, 'INFO', 'commandstats'));
    const cpu = String(await redisCommand(port, 'INFO', 'cpu'));
    let calls = 0;
    for (const [, n] of commands.matchAll(/^cmdstat_\S+?:calls=(\d+)/gm)) calls += Number(n);
    const seconds = (name) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(cpu)?.[1] ?? 0);
    stats.push({ port, calls, cpu: seconds('used_cpu_user') + seconds('used_cpu_sys') });
  }
  return stats;
}

function redisSide(before, after, units) {
  const per = after.map((a, i) => ({ calls: a.calls - before[i].calls - 2, cpu: a.cpu - before[i].cpu }));
  const calls = per.reduce((s, p) => s + p.calls, 0);
  const cpu = per.reduce((s, p) => s + p.cpu, 0);
  return {
    commandsPer: calls / units,
    cpuUsPer: (cpu * 1e6) / units,
    shares: per.map((p) => (calls > 0 ? p.calls / calls : 0)),
  };
}

let nextId = 1;
async function call(url, headers, name, args) {
  const id = nextId++;
  const body = JSON.stringify({
    jsonrpc: '2.0',
    id,
    method: 'tools/call',
    params: { name, arguments: args, _meta: { progressToken: id } },
  });
  const res = await fetch(url, { method: 'POST', headers, body });
  const text = await res.text();
  if (res.status !== 200 || !text.includes(`"result"`) || !text.includes(`"id":${id}}`))
    throw new Error(`${name} answered ${res.status}: ${text.slice(0, 200)}`);
}

/** `work(i)` from CONCURRENCY workers for DURATION_MS; resolves with how many times it ran. */
async function during(work) {
  const end = performance.now() + DURATION_MS;
  let done = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async (_, w) => {
      for (let i = 0; performance.now() < end; i++) {
        await work(w, i);
        done++;
      }
    }),
  );
  return done;
}

/** Three instances on `target`, IN_USE sessions made on them in turn, and every copy and connection warmed up. */
async function setUp(label, target, masterPorts) {
  const servers = await instances(target);
  const urls = servers.map((s) => s.url);
  const sessions = [];
  for (let i = 0; i < IN_USE; i++) sessions.push({ ...HEADERS, 'mcp-session-id': await session(urls[i % 3]) });
  for (const headers of sessions) for (const url of urls) await call(url, headers, 'test_simple_text', {});
  return { label, servers, urls, sessions, masterPorts, rounds: [] };
}

/** One round of both rows on `setup`: calls/s, events/s and what the masters did for them. */
async function round(setup) {
  const { urls, sessions, masterPorts } = setup;
  /** Worker `w`'s `i`-th session: the workers go through every session in turn. */
  const at = (w, i) => (w + i * CONCURRENCY) % sessions.length;
  let before = await masterStats(masterPorts);
  let started = performance.now();
  const calls = await during((w, i) => call(urls[i % 3], sessions[at(w, i)], 'test_simple_text', {}));
  const callSeconds = (performance.now() - started) / 1000;
  const callSide = redisSide(before, await masterStats(masterPorts), calls);
  before = await masterStats(masterPorts);
  started = performance.now();
  // On the instance that made the session (i % 3 made session i): its own copy writes the stream.
  const longCalls = await during((w, i) => call(urls[at(w, i) % 3], sessions[at(w, i)], 'long_task', { steps: STEPS, intervalMs: 0 }));
  const eventSeconds = (performance.now() - started) / 1000;
  // Each step is two events (its log and its progress notification), and each call one more (its answer).
  const events = longCalls * (2 * STEPS + 1);
  const eventSide = redisSide(before, await masterStats(masterPorts), events);
  setup.rounds.push({ calls: calls / callSeconds, events: events / eventSeconds, callSide, eventSide });
}

/** The new keys on each master for SESSIONS more sessions. */
async function keySpread({ urls, masterPorts }) {
  const dbsize = () => Promise.all(masterPorts.map(async (port) => Number(await redisCommand(port, 'DBSIZE'))));
  const before = await dbsize();
  for (let i = 0; i < SESSIONS; i += CONCURRENCY)
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, SESSIONS - i) }, (_, k) => session(urls[(i + k) % 3])));
  return (await dbsize()).map((n, i) => n - before[i]);
}

const one = await startRedis();
const onePort = Number(new URL(one.url).port);
const cluster = await startRedisCluster({ replicas: 0 });
const setups = [
  await setUp('one redis-server', { url: one.url }, [onePort]),
  await setUp(
    'Redis Cluster, 3 masters',
    { redisCluster: { nodes: cluster.seeds } },
    (await cluster.masters()).map((m) => m.port),
  ),
];
// Warm-up (the JIT, the streams' first keys), then the rounds, the two Redis taken in turn to spread drift.
for (const setup of setups) await round(setup);
for (const setup of setups) setup.rounds = [];
for (let r = 0; r < ROUNDS; r++) for (const setup of setups) await round(setup);
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const rows = [];
for (const setup of setups) {
  const best = (pick) => median(setup.rounds.map(pick));
  rows.push({
    label: setup.label,
    calls: best((r) => r.calls),
    events: best((r) => r.events),
    callSide: {
      commandsPer: best((r) => r.callSide.commandsPer),
      cpuUsPer: best((r) => r.callSide.cpuUsPer),
      shares: setup.rounds.at(-1).callSide.shares,
    },
    eventSide: {
      commandsPer: best((r) => r.eventSide.commandsPer),
      cpuUsPer: best((r) => r.eventSide.cpuUsPer),
      shares: setup.rounds.at(-1).eventSide.shares,
    },
    perRound: setup.rounds.map((r) => `${Math.round(r.calls)} calls/s, ${Math.round(r.events)} events/s`).join('; '),
    keys: await keySpread(setup),
  });
  for (const s of setup.servers) await s.close();
}
one.child.kill('SIGKILL');
await cluster.close();

const pct = (shares) => shares.map((s) => `${(s * 100).toFixed(0)}%`).join(' / ');
console.log(
  `3 instances (shared mode) in this process, ${CONCURRENCY} calls in flight over ${IN_USE} sessions, ${DURATION_MS} ms per row, median of ${ROUNDS} rounds taken in turn; ` +
    `long_task { steps: ${STEPS}, intervalMs: 0 }; node ${process.version}`,
);
console.log(
  `| Redis | tools/call/s | Redis commands per call | Redis CPU per call | events/s | Redis commands per event | Redis CPU per event | each master's share of the commands (calls; events) | new keys per master for ${SESSIONS} sessions |`,
);
console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |');
for (const r of rows)
  console.log(
    `| ${r.label} | ${Math.round(r.calls).toLocaleString('en-US')} | ${r.callSide.commandsPer.toFixed(2)} | ${r.callSide.cpuUsPer.toFixed(1)} µs | ` +
      `${Math.round(r.events).toLocaleString('en-US')} | ${r.eventSide.commandsPer.toFixed(2)} | ${r.eventSide.cpuUsPer.toFixed(1)} µs | ` +
      `${pct(r.callSide.shares)}; ${pct(r.eventSide.shares)} | ${r.keys.join(' / ')} |`,
  );
for (const r of rows) console.log(`${r.label}, per round: ${r.perRound}`);
const [single, sharded] = rows;
console.log(
  `\nRedis Cluster ÷ one redis-server: tools/call/s ${(sharded.calls / single.calls).toFixed(2)}×, events/s ${(sharded.events / single.events).toFixed(2)}×; ` +
    `Redis CPU per call ${(sharded.callSide.cpuUsPer / single.callSide.cpuUsPer).toFixed(2)}×, per event ${(sharded.eventSide.cpuUsPer / single.eventSide.cpuUsPer).toFixed(2)}×`,
);
process.exit(0);
