#!/usr/bin/env node
// tools/call through two instances on one Redis, in the two cluster modes of @mcp-kit/redis, in one
// run on this machine (docs/design.md, "The two cluster modes"):
//   node scripts/bench-cluster-modes.mjs     (after `pnpm build`; needs redis-server on PATH)
//
// - forward: instances with `internalUrl`; sessions initialized on A, every call sent to B, which
//   forwards it to A over HTTP (keep-alive);
// - shared: no `internalUrl`; sessions initialized on A, every call sent to B, which serves it with
//   its own copy of the session (restored from the record at the session's first request there);
// - each with the calls alternating A, B, A… as a round-robin load balancer sends them;
// - and, as the floor, the calls sent to A itself (the owner) and one instance without Redis.
// Then the first request of a session on an instance that has never seen it: a forward in one
// mode, a restore from the record in the other. Redis runs on loopback; CONCURRENCY sessions call
// in parallel for DURATION_MS per row, rows interleaved twice (ROUNDS) to spread drift.
// Each row also counts the Redis commands its timed calls cost (INFO commandstats before and after,
// less what the four instances' heartbeats send meanwhile, measured while no call runs).
import { createRedisScaleOut, RedisEventStore } from '../packages/redis/dist/index.js';
import { HEADERS, serve, session, startRedis } from './bench-support.mjs';

const DURATION_MS = Number(process.env.DURATION_MS ?? 4_000);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 8);
const ROUNDS = Number(process.env.ROUNDS ?? 2);
const FIRSTS = Number(process.env.FIRSTS ?? 200);

/** One instance: its own HTTP server and, with `redis`, its own scale-out (`shared`: no internalUrl). */
async function instance(redis, prefix, shared) {
  let scaleOut;
  const served = await serve((url) => {
    if (!redis) return {};
    scaleOut = createRedisScaleOut({ url: redis.url, keyPrefix: prefix, ...(shared ? { mode: 'shared' } : { internalUrl: url }) });
    return { eventStore: scaleOut.eventStore, cluster: scaleOut.cluster, taskStore: scaleOut.taskStore };
  });
  await scaleOut?.ready(5_000);
  return served;
}

async function openSession(url) {
  return { ...HEADERS, 'mcp-session-id': await session(url) };
}

let nextId = 1;
async function call(url, headers) {
  const id = nextId++;
  const body = JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'test_simple_text', arguments: {} } });
  const res = await fetch(url, { method: 'POST', headers, body });
  const text = await res.text();
  if (res.status !== 200 || !text.includes(`"id":${id}`)) throw new Error(`call answered ${res.status}: ${text.slice(0, 200)}`);
}

/** Calls per Redis command name since Redis started (`INFO commandstats`). */
async function commandCounts() {
  const counts = {};
  for (const [, name, calls] of (await probe.client.info('commandstats')).matchAll(/^cmdstat_(\S+?):calls=(\d+)/gm))
    counts[name] = Number(calls);
  return counts;
}

/** What Redis was sent between two `commandCounts()`: the total and the commands by name. */
function commandsBetween(before, after) {
  const by = {};
  for (const [name, n] of Object.entries(after)) if (n - (before[name] ?? 0) > 0) by[name] = n - (before[name] ?? 0);
  // Not ours: INFO itself, the one before the window counted in `after`.
  if (by.info) by.info -= 1;
  return { total: Object.values(by).reduce((a, b) => a + b, 0), by };
}

/**
 * `CONCURRENCY` sessions made on `home`, calling `targets(i)` in turn for `DURATION_MS`: calls/s, p50
 * latency, and the Redis commands of the timed calls.
 */
async function measure(home, targets, durationMs = DURATION_MS) {
  const sessions = await Promise.all(Array.from({ length: CONCURRENCY }, () => openSession(home)));
  // One call each first, untimed: the copies (shared) and keep-alive connections are made.
  for (const headers of sessions) for (const url of targets) await call(url, headers);
  const samples = [];
  const before = await commandCounts();
  const started = performance.now();
  const end = performance.now() + durationMs;
  await Promise.all(
    sessions.map(async (headers) => {
      for (let i = 0; performance.now() < end; i++) {
        const t = performance.now();
        await call(targets[i % targets.length], headers);
        samples.push(performance.now() - t);
      }
    }),
  );
  const commands = commandsBetween(before, await commandCounts());
  const background = (idlePerSecond * (performance.now() - started)) / 1000;
  samples.sort((a, b) => a - b);
  return {
    rate: samples.length / (durationMs / 1000),
    p50: samples[Math.floor(samples.length / 2)],
    commandsPerCall: Math.max(0, commands.total - background) / samples.length,
    by: commands.by,
    calls: samples.length,
  };
}

/** The first request of fresh sessions on an instance that has not seen them: p50 and p99 in ms. */
async function firsts(home, other) {
  const samples = [];
  for (let i = 0; i < FIRSTS; i++) {
    const headers = await openSession(home);
    const t = performance.now();
    await call(other, headers);
    samples.push(performance.now() - t);
  }
  samples.sort((a, b) => a - b);
  return { p50: samples[Math.floor(samples.length / 2)], p99: samples[Math.floor(samples.length * 0.99)] };
}

const redis = await startRedis();
const alone = await instance(undefined);
const fwdA = await instance(redis, 'fwd:', false);
const fwdB = await instance(redis, 'fwd:', false);
const shA = await instance(redis, 'sh:', true);
const shB = await instance(redis, 'sh:', true);
const probe = new RedisEventStore({ url: redis.url, keyPrefix: 'probe:' });
await probe.ready(5_000);
// What the instances send Redis while nobody calls (heartbeats, inbox reads): per second.
const idleBefore = await commandCounts();
const idleMs = 3_000;
await new Promise((resolve) => setTimeout(resolve, idleMs));
const idlePerSecond = commandsBetween(idleBefore, await commandCounts()).total / (idleMs / 1000);

const rows = {
  'one instance, no Redis': (ms) => measure(alone.url, [alone.url], ms),
  'forward: calls on the owner A': (ms) => measure(fwdA.url, [fwdA.url], ms),
  'forward: calls on B (forwarded to A)': (ms) => measure(fwdA.url, [fwdB.url], ms),
  'forward: calls alternating A, B': (ms) => measure(fwdA.url, [fwdA.url, fwdB.url], ms),
  'shared: calls on A (where initialized)': (ms) => measure(shA.url, [shA.url], ms),
  'shared: calls on B (its own copy)': (ms) => measure(shA.url, [shB.url], ms),
  'shared: calls alternating A, B': (ms) => measure(shA.url, [shA.url, shB.url], ms),
};
// Warm-up: every row once for a second, unrecorded, so the first row does not pay for the JIT.
for (const name of Object.keys(rows)) await rows[name](1_000);
const results = Object.fromEntries(Object.keys(rows).map((k) => [k, []]));
for (let round = 0; round < ROUNDS; round++) for (const [name, run] of Object.entries(rows)) results[name].push(await run());

console.log(
  `tools/call (test_simple_text), ${CONCURRENCY} sessions in parallel, ${DURATION_MS} ms per row, ${ROUNDS} rounds interleaved; node ${process.version}`,
);
console.log(`Redis commands while no call runs: ${idlePerSecond.toFixed(1)}/s (subtracted from each row's count)`);
console.log('| row | calls/s per round | p50 ms per round | Redis commands per call | the commands of one call (last round) |');
console.log('| --- | --- | --- | --- | --- |');
for (const [name, list] of Object.entries(results)) {
  const last = list.at(-1);
  const perCall = Object.entries(last.by)
    .filter(([, n]) => n / last.calls >= 0.05)
    .sort((a, b) => b[1] - a[1])
    .map(([cmd, n]) => `${cmd} ${(n / last.calls).toFixed(2)}`)
    .join(', ');
  console.log(
    `| ${name} | ${list.map((r) => Math.round(r.rate).toLocaleString('en-US')).join(' / ')} | ${list.map((r) => r.p50.toFixed(2)).join(' / ')} | ${list.map((r) => r.commandsPerCall.toFixed(2)).join(' / ')} | ${perCall || '—'} |`,
  );
}
const mean = (name) => results[name].reduce((a, r) => a + r.rate, 0) / results[name].length;
console.log(
  `\nshared ÷ forward, calls on B: ${(mean('shared: calls on B (its own copy)') / mean('forward: calls on B (forwarded to A)')).toFixed(2)}×; alternating: ${(mean('shared: calls alternating A, B') / mean('forward: calls alternating A, B')).toFixed(2)}×; shared on B ÷ one instance without Redis: ${(mean('shared: calls on B (its own copy)') / mean('one instance, no Redis')).toFixed(2)}×`,
);
const fwdFirst = await firsts(fwdA.url, fwdB.url);
const shFirst = await firsts(shA.url, shB.url);
console.log(
  `first request of a session on the other instance (${FIRSTS} sessions): forward (a hop to the owner) p50 ${fwdFirst.p50.toFixed(2)} ms, p99 ${fwdFirst.p99.toFixed(2)} ms; shared (a copy restored from the record) p50 ${shFirst.p50.toFixed(2)} ms, p99 ${shFirst.p99.toFixed(2)} ms`,
);
await probe.close();
for (const i of [alone, fwdA, fwdB, shA, shB]) await i.close();
redis.child.kill('SIGKILL');
process.exit(0);
