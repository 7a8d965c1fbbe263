#!/usr/bin/env node
// What resuming through Redis costs next to the memory store, measured in one run on this machine:
//   node scripts/bench-redis.mjs            (after `pnpm build`; needs redis-server on PATH)
// 1. EventStore.replayAfter of N frames, in process: MemoryEventStore vs RedisEventStore.
// 2. GET + Last-Event-ID over HTTP replaying a finished call of N log events plus its result:
//    memory store; Redis store on the owner; Redis store on another instance (cluster mode).
// 3. A tool sending N events with no pause (each is stored before it is written): memory vs Redis.
// 4. A POST dropped right after its priming event, resumed at once (same instance, or another one
//    that replays from Redis and then follows the live tail), read until the result.
// Redis runs on loopback, so the numbers are the floor; add your network round trip per command.
import { MemoryEventStore } from '@mcp-kit/core';
import { createRedisScaleOut, RedisEventStore } from '../packages/redis/dist/index.js';
import { HEADERS, serve, session, startRedis } from './bench-support.mjs';

const ROUNDS = Number(process.env.ROUNDS ?? 200);
const SIZES = [10, 100, 1000];

function stats(samples) {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q) => s[Math.min(s.length - 1, Math.floor(q * s.length))];
  return { p50: at(0.5), p99: at(0.99) };
}
const ms = (x) => `${x.toFixed(2)} ms`;
const us = (x) => `${(x * 1000).toFixed(1)} µs`;

async function time(fn, rounds = ROUNDS) {
  for (let i = 0; i < Math.min(20, rounds); i++) await fn(); // warm-up
  const samples = [];
  for (let i = 0; i < rounds; i++) {
    const t = performance.now();
    await fn();
    samples.push(performance.now() - t);
  }
  return stats(samples);
}

/** Runs long_task to completion and returns the priming cursor of its stream. */
async function finishedCall(url, sessionId, steps) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { ...HEADERS, 'mcp-session-id': sessionId },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'long_task', arguments: { steps, intervalMs: 0 } },
    }),
  });
  const text = await res.text();
  const cursor = /^id: (\S+)$/m.exec(text)?.[1];
  if (!cursor?.endsWith('.0')) throw new Error(`no priming cursor in:\n${text.slice(0, 300)}`);
  return cursor;
}

async function replayOverHttp(url, sessionId, cursor, expected) {
  const res = await fetch(url, {
    headers: { accept: 'text/event-stream', 'mcp-protocol-version': '2025-11-25', 'mcp-session-id': sessionId, 'last-event-id': cursor },
  });
  const text = await res.text();
  const events = text.split('\ndata: {').length - 1;
  if (res.status !== 200 || events !== expected) throw new Error(`resume: status ${res.status}, ${events} events, expected ${expected}`);
}

async function toolCall(url, sessionId, steps) {
  const res = await fetch(url, {
    method: 'POST',
    headers: { ...HEADERS, 'mcp-session-id': sessionId },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: { name: 'long_task', arguments: { steps, intervalMs: 0 } },
    }),
  });
  await res.text();
}

/** POSTs long_task, drops the connection after the priming event, resumes on `resumeUrl` and reads to the result. */
async function dropAndFollow(postUrl, resumeUrl, sessionId, steps) {
  const controller = new AbortController();
  const res = await fetch(postUrl, {
    method: 'POST',
    headers: { ...HEADERS, 'mcp-session-id': sessionId },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 3,
      method: 'tools/call',
      params: { name: 'long_task', arguments: { steps, intervalMs: 0 } },
    }),
    signal: controller.signal,
  });
  const reader = res.body.getReader();
  let head = '';
  while (!head.includes('\n\n')) head += new TextDecoder().decode((await reader.read()).value);
  controller.abort();
  const cursor = /^id: (\S+)$/m.exec(head)[1];
  await replayOverHttp(resumeUrl, sessionId, cursor, steps + 1);
}

const redis = await startRedis();
try {
  const probe = new RedisEventStore({ url: redis.url });
  await probe.ready(10_000);
  const info = await probe.client.info('server');
  console.log(
    `node ${process.version}, redis ${/redis_version:(\S+)/.exec(info)?.[1]} on loopback, ${ROUNDS} rounds per row (p50 / p99)\n`,
  );

  console.log('1. replayAfter(N frames of ~200 B), in process');
  const memory = new MemoryEventStore();
  const frame = (seq) =>
    `id: ${'s'.repeat(22)}.${seq}\ndata: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'x'.repeat(90) } })}\n\n`;
  for (const n of SIZES) {
    const key = { sessionId: `bench-${n}`, streamId: `${'s'.repeat(18)}${String(n).padStart(4, '0')}` };
    for (let seq = 1; seq <= n; seq++) {
      memory.append(key, seq, frame(seq), seq === n);
      await probe.append(key, seq, frame(seq), seq === n);
    }
    const m = await time(() => memory.replayAfter(key.sessionId, key.streamId, 0));
    const r = await time(() => probe.replayAfter(key.sessionId, key.streamId, 0));
    console.log(`   N=${String(n).padEnd(5)} memory ${us(m.p50)} / ${us(m.p99)}   redis ${us(r.p50)} / ${us(r.p99)}`);
  }
  await probe.close();

  const mem = await serve({});
  const scaleA = createRedisScaleOut({ url: redis.url, internalUrl: 'http://127.0.0.1:1/mcp', instanceId: 'bench-a' });
  const scaleB = createRedisScaleOut({ url: redis.url, internalUrl: 'http://127.0.0.1:1/mcp', instanceId: 'bench-b' });
  await Promise.all([scaleA.ready(), scaleB.ready()]);
  const a = await serve({ eventStore: scaleA.eventStore, cluster: scaleA.cluster, taskStore: scaleA.taskStore });
  const b = await serve({ eventStore: scaleB.eventStore, cluster: scaleB.cluster, taskStore: scaleB.taskStore });

  console.log('\n2. GET + Last-Event-ID replaying a finished call (N log events + the result), over HTTP');
  for (const n of SIZES) {
    const ms1 = await session(mem.url);
    const c1 = await finishedCall(mem.url, ms1, n);
    const rs = await session(a.url);
    const c2 = await finishedCall(a.url, rs, n);
    const rounds = n >= 1000 ? Math.max(20, ROUNDS / 4) : ROUNDS;
    const m = await time(() => replayOverHttp(mem.url, ms1, c1, n + 1), rounds);
    const owner = await time(() => replayOverHttp(a.url, rs, c2, n + 1), rounds);
    const other = await time(() => replayOverHttp(b.url, rs, c2, n + 1), rounds);
    console.log(
      `   N=${String(n).padEnd(5)} memory ${ms(m.p50)} / ${ms(m.p99)}   redis, owner ${ms(owner.p50)} / ${ms(owner.p99)}   redis, other instance ${ms(other.p50)} / ${ms(other.p99)}`,
    );
  }

  console.log('\n3. a tool sending N events back to back (each stored before it is written), whole call over HTTP');
  for (const n of [100, 1000]) {
    const s1 = await session(mem.url);
    const s2 = await session(a.url);
    const rounds = n >= 1000 ? 20 : 50;
    const m = await time(() => toolCall(mem.url, s1, n), rounds);
    const r = await time(() => toolCall(a.url, s2, n), rounds);
    console.log(
      `   N=${String(n).padEnd(5)} memory ${ms(m.p50)} (${((m.p50 * 1000) / n).toFixed(1)} µs/event)   redis ${ms(r.p50)} (${((r.p50 * 1000) / n).toFixed(1)} µs/event)`,
    );
  }

  console.log('\n4. resume right after the POST dropped, then follow the running tool live to its result (N events back to back)');
  for (const n of [100, 1000]) {
    const sm = await session(mem.url);
    const sr = await session(a.url);
    const rounds = n >= 1000 ? 20 : 50;
    const m = await time(() => dropAndFollow(mem.url, mem.url, sm, n), rounds);
    const owner = await time(() => dropAndFollow(a.url, a.url, sr, n), rounds);
    const other = await time(() => dropAndFollow(a.url, b.url, sr, n), rounds);
    console.log(
      `   N=${String(n).padEnd(5)} memory ${ms(m.p50)}   redis, owner ${ms(owner.p50)}   redis, other instance (live tail) ${ms(other.p50)}`,
    );
  }

  await Promise.all([mem.close(), a.close(), b.close()]);
} finally {
  process.kill(redis.child.pid, 'SIGKILL');
}
