#!/usr/bin/env node
// tools/call through two instances on one Redis, in the two cluster modes of @mcp-kit/redis, in one
// run on this machine (issue 21):
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
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { createServer as netServer } from 'node:net';
import { createMcpHandler, handleNodeRequest } from '@mcp-kit/core';
import { createFixtureServer } from '@mcp-kit/fixtures';
import { createRedisScaleOut } from '../packages/redis/dist/index.js';

const DURATION_MS = Number(process.env.DURATION_MS ?? 4_000);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 8);
const ROUNDS = Number(process.env.ROUNDS ?? 2);
const FIRSTS = Number(process.env.FIRSTS ?? 200);

const freePort = () =>
  new Promise((resolve) => {
    const s = netServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

async function startRedis() {
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  child.on('error', (e) => {
    console.error(`redis-server could not start (${e.message}); install it: apt-get install -y redis-server`);
    process.exit(1);
  });
  for (let i = 0; i < 100; i++) {
    const up = await new Promise((resolve) => {
      const s = netServer();
      const c = s.listen(port, '127.0.0.1');
      c.once('error', () => resolve(true));
      c.once('listening', () => s.close(() => resolve(false)));
    });
    if (up) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  return { url: `redis://127.0.0.1:${port}`, child };
}

/** One instance: its own HTTP server and, with `redis`, its own scale-out (`shared`: no internalUrl). */
async function instance(redis, prefix, shared) {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}/mcp`;
  const scaleOut = redis ? createRedisScaleOut({ url: redis.url, keyPrefix: prefix, ...(shared ? {} : { internalUrl: url }) }) : undefined;
  const handler = createMcpHandler({
    server: () => createFixtureServer(),
    dnsRebindingProtection: false,
    onError: () => {},
    ...(scaleOut ? { eventStore: scaleOut.eventStore, cluster: scaleOut.cluster, taskStore: scaleOut.taskStore } : {}),
  });
  const server = createServer((req, res) => void handleNodeRequest(handler, req, res));
  await new Promise((r) => server.listen(port, '127.0.0.1', r));
  await scaleOut?.ready(5_000);
  return {
    url,
    async close() {
      await handler.close();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' };

async function openSession(url) {
  const init = {
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'bench', version: '1' } },
  };
  const res = await fetch(url, { method: 'POST', headers: HEADERS, body: JSON.stringify(init) });
  const sessionId = res.headers.get('mcp-session-id');
  await res.text();
  const headers = { ...HEADERS, 'mcp-session-id': sessionId };
  await (
    await fetch(url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) })
  ).text();
  return headers;
}

let nextId = 1;
async function call(url, headers) {
  const id = nextId++;
  const body = JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'test_simple_text', arguments: {} } });
  const res = await fetch(url, { method: 'POST', headers, body });
  const text = await res.text();
  if (res.status !== 200 || !text.includes(`"id":${id}`)) throw new Error(`call answered ${res.status}: ${text.slice(0, 200)}`);
}

/** `CONCURRENCY` sessions made on `home`, calling `targets(i)` in turn for `DURATION_MS`: calls/s and p50 latency. */
async function measure(home, targets) {
  const sessions = await Promise.all(Array.from({ length: CONCURRENCY }, () => openSession(home)));
  // One call each first, untimed: the copies (shared) and keep-alive connections are made.
  for (const headers of sessions) for (const url of targets) await call(url, headers);
  const samples = [];
  const end = performance.now() + DURATION_MS;
  await Promise.all(
    sessions.map(async (headers) => {
      for (let i = 0; performance.now() < end; i++) {
        const t = performance.now();
        await call(targets[i % targets.length], headers);
        samples.push(performance.now() - t);
      }
    }),
  );
  samples.sort((a, b) => a - b);
  return { rate: samples.length / (DURATION_MS / 1000), p50: samples[Math.floor(samples.length / 2)] };
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

const rows = {
  'one instance, no Redis': () => measure(alone.url, [alone.url]),
  'forward: calls on the owner A': () => measure(fwdA.url, [fwdA.url]),
  'forward: calls on B (forwarded to A)': () => measure(fwdA.url, [fwdB.url]),
  'forward: calls alternating A, B': () => measure(fwdA.url, [fwdA.url, fwdB.url]),
  'shared: calls on A (where initialized)': () => measure(shA.url, [shA.url]),
  'shared: calls on B (its own copy)': () => measure(shA.url, [shB.url]),
  'shared: calls alternating A, B': () => measure(shA.url, [shA.url, shB.url]),
};
const results = Object.fromEntries(Object.keys(rows).map((k) => [k, []]));
for (let round = 0; round < ROUNDS; round++) for (const [name, run] of Object.entries(rows)) results[name].push(await run());

console.log(
  `tools/call (test_simple_text), ${CONCURRENCY} sessions in parallel, ${DURATION_MS} ms per row, ${ROUNDS} rounds interleaved; node ${process.version}`,
);
console.log('| row | calls/s per round | p50 ms per round |');
console.log('| --- | --- | --- |');
for (const [name, list] of Object.entries(results)) {
  console.log(
    `| ${name} | ${list.map((r) => Math.round(r.rate).toLocaleString('en-US')).join(' / ')} | ${list.map((r) => r.p50.toFixed(2)).join(' / ')} |`,
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
for (const i of [alone, fwdA, fwdB, shA, shB]) await i.close();
redis.child.kill('SIGKILL');
process.exit(0);
