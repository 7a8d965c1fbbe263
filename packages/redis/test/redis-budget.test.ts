/**
 * What Redis is asked per event, per `tools/call` and per idle session, against a real
 * redis-server, in both cluster modes. Redis is the one part every instance shares, so what it
 * executes per event is the budget of the whole deployment (DESIGN, "Scale-out"):
 * - an event of a running tool costs at most 3 executed commands, in one round trip;
 * - a `tools/call` (its stream, its answer) at most 6;
 * - an idle session (after `initialize` and `notifications/initialized`) at most 2 KB of Redis memory.
 *
 * `INFO commandstats` counts every command a script runs, and the `EVALSHA` itself; so a change
 * that adds a command per event (a TTL refreshed per frame, one more read) fails here. Heartbeats
 * and sweeps are a minute apart, so nothing but the calls runs while they are counted.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createMcpHandler, handleNodeRequest, type McpHandler } from '@mcp-kit/core';
import { createFixtureServer } from '@mcp-kit/fixtures';
import { createRedisScaleOut, type ClusterMode, type RedisScaleOut } from '@mcp-kit/redis';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';
import { callTool } from '@mcp-kit/testbed/requests';
import { http, openSession as openRawSession } from '@mcp-kit/testbed/fetch-client';

/** Calls per Redis command name since Redis started. */
async function commandCounts(admin: Redis): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const [, name, calls] of (await admin.info('commandstats')).matchAll(/^cmdstat_(\S+?):calls=(\d+)/gm)) counts[name!] = Number(calls);
  return counts;
}

/** What ran between two {@link commandCounts} (the INFO that took `after` not counted). */
function between(before: Record<string, number>, after: Record<string, number>): { total: number; by: Record<string, number> } {
  const by: Record<string, number> = {};
  for (const [name, n] of Object.entries(after)) if (n - (before[name] ?? 0) > 0) by[name] = n - (before[name] ?? 0);
  if (by.info !== undefined) by.info -= 1;
  if (by.info === 0) delete by.info;
  return { total: Object.values(by).reduce((a, b) => a + b, 0), by };
}

interface Instance {
  url: string;
  scaleOut: RedisScaleOut;
  handler: McpHandler;
  server: Server;
  /** Commands this instance sent to Redis (each command of a pipeline counts): its round trips at most. */
  sent: () => number;
}

async function startInstance(redis: TestRedis, mode: ClusterMode, prefix: string): Promise<Instance> {
  const server = createServer((req, res) => void handleNodeRequest(handler, req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  const scaleOut = createRedisScaleOut({
    url: redis.url,
    keyPrefix: prefix,
    heartbeatMs: 60_000,
    ...(mode === 'shared' ? { mode } : { internalUrl: url }),
  });
  let sent = 0;
  const send = scaleOut.client.sendCommand.bind(scaleOut.client) as Redis['sendCommand'];
  scaleOut.client.sendCommand = ((...args: Parameters<Redis['sendCommand']>) => {
    sent++;
    return send(...args);
  }) as typeof scaleOut.client.sendCommand;
  const handler = createMcpHandler({
    server: () => createFixtureServer(),
    eventStore: scaleOut.eventStore,
    cluster: scaleOut.cluster,
    taskStore: scaleOut.taskStore,
    sessionIdleTtlMs: 60 * 60_000,
  });
  await scaleOut.ready(5_000);
  return { url, scaleOut, handler, server, sent: () => sent };
}

async function stopInstance(instance: Instance): Promise<void> {
  await instance.handler.close();
  await new Promise<void>((resolve) => instance.server.close(() => resolve()));
}

/** A session: `initialize`, then `notifications/initialized`; its id. */
async function openSession(url: string): Promise<string> {
  return (await openRawSession(http(url))).sessionId;
}

let nextId = 1;
/** One `tools/call`, read to its answer. */
async function call(url: string, sessionId: string, name: string, args: Record<string, unknown> = {}): Promise<void> {
  const id = nextId++;
  const res = await http(url).post(callTool(id, name, args), { 'mcp-session-id': sessionId });
  const body = await res.text();
  if (res.status !== 200 || !body.includes(`"id":${id}`)) throw new Error(`${name} answered ${res.status}: ${body.slice(0, 300)}`);
}

/** What Redis executed, and what the instance sent, while `work` ran. */
async function measured(admin: Redis, instance: Instance, work: () => Promise<void>) {
  const before = await commandCounts(admin);
  const sentBefore = instance.sent();
  await work();
  // Appends settle before the answer goes out; nothing else is due.
  const executed = between(before, await commandCounts(admin));
  return { executed, sent: instance.sent() - sentBefore };
}

const CALLS = 40;
const STEPS = 100;

for (const mode of ['forward', 'shared'] as const) {
  describe(`what Redis is asked (${mode === 'forward' ? 'forwarding' : 'shared'} cluster)`, () => {
    let redis: TestRedis;
    let admin: Redis;
    let a: Instance;
    let b: Instance;

    beforeAll(async () => {
      redis = await startRedis();
      admin = new Redis(redis.url);
      a = await startInstance(redis, mode, `budget-${mode}:`);
      b = await startInstance(redis, mode, `budget-${mode}:`);
    });

    afterAll(async () => {
      if (b) await stopInstance(b);
      if (a) await stopInstance(a);
      admin?.disconnect();
      await redis?.stop();
    });

    it('a tools/call costs at most 6 executed commands; an event of a running tool at most 3, in one round trip', async () => {
      const sessionId = await openSession(a.url);
      await call(a.url, sessionId, 'test_simple_text');
      const calls = await measured(admin, a, async () => {
        for (let i = 0; i < CALLS; i++) await call(a.url, sessionId, 'test_simple_text');
      });
      const perCall = calls.executed.total / CALLS;
      // What one more event costs: the same tool with more steps, the difference per step. Steps
      // sent back to back (a burst) and spaced out (each event goes to Redis on its own then).
      const run = (steps: number, intervalMs: number) =>
        measured(admin, a, async () => void (await call(a.url, sessionId, 'long_task', { steps, intervalMs })));
      const perEvent = async (intervalMs: number) => {
        const short = await run(STEPS / 4, intervalMs);
        const long = await run(STEPS, intervalMs);
        const steps = STEPS - STEPS / 4;
        return {
          executed: (long.executed.total - short.executed.total) / steps,
          sent: (long.sent - short.sent) / steps,
          /** What the call costs beside its steps. */
          overhead: long.executed.total - (STEPS * (long.executed.total - short.executed.total)) / steps,
          by: scaled(long.executed.by, STEPS),
        };
      };
      const burst = await perEvent(0);
      const spaced = await perEvent(3);
      console.log(
        `${mode}: per tools/call ${perCall.toFixed(2)} executed (${JSON.stringify(scaled(calls.executed.by, CALLS))}), ${(calls.sent / CALLS).toFixed(2)} sent; ` +
          `per event: burst ${burst.executed.toFixed(2)} executed, ${burst.sent.toFixed(2)} sent (${JSON.stringify(burst.by)}); ` +
          `spaced ${spaced.executed.toFixed(2)} executed, ${spaced.sent.toFixed(2)} sent (${JSON.stringify(spaced.by)}); ` +
          `a streaming call beside its events: ${spaced.overhead.toFixed(2)}`,
      );
      expect(perCall).toBeLessThanOrEqual(6);
      expect(burst.executed).toBeLessThanOrEqual(3);
      expect(spaced.executed).toBeLessThanOrEqual(3);
      // One round trip per event at most (a burst shares them).
      expect(spaced.sent).toBeLessThanOrEqual(1);
      // Its stream's registration and TTL, its answer: once per call, not per event.
      expect(spaced.overhead).toBeLessThanOrEqual(7);
    });

    it(`a tools/call that reaches another instance costs ${mode === 'forward' ? 'one command more (the owner lookup)' : 'the same (on its copy)'}`, async () => {
      const sessionId = await openSession(a.url);
      // Its first request there: the owner found and a keep-alive connection made, or the copy restored.
      await call(b.url, sessionId, 'test_simple_text');
      const calls = await measured(admin, b, async () => {
        for (let i = 0; i < CALLS; i++) await call(b.url, sessionId, 'test_simple_text');
      });
      const perCall = calls.executed.total / CALLS;
      console.log(
        `${mode}: per tools/call on the other instance ${perCall.toFixed(2)} executed (${JSON.stringify(scaled(calls.executed.by, CALLS))})`,
      );
      // Forwarding: HMGET of the owner per request, and EXISTS of its heartbeat at most once per half a heartbeat (a minute here).
      expect(perCall).toBeLessThanOrEqual(mode === 'forward' ? 7.1 : 6);
    });

    it('an idle session costs Redis at most 2 KB', async () => {
      const N = 300;
      await admin.call('MEMORY', 'PURGE').catch(() => {});
      const before = Number(/^used_memory:(\d+)/m.exec(await admin.info('memory'))![1]);
      const ids: string[] = [];
      for (let i = 0; i < N; i += 10) ids.push(...(await Promise.all(Array.from({ length: 10 }, () => openSession(a.url)))));
      const after = Number(/^used_memory:(\d+)/m.exec(await admin.info('memory'))![1]);
      const perSession = (after - before) / N;
      const keys = await admin.keys(`*${ids[0]}*`);
      const usage: Record<string, number> = {};
      for (const key of keys) usage[key.replace(ids[0]!, '<sid>')] = Number(await admin.call('MEMORY', 'USAGE', key, 'SAMPLES', '0'));
      console.log(`${mode}: ${perSession.toFixed(0)} B of used_memory per idle session (${N}); keys of one: ${JSON.stringify(usage)}`);
      expect(perSession).toBeLessThanOrEqual(2048);
    });
  });
}

function scaled(by: Record<string, number>, n: number): Record<string, number> {
  return Object.fromEntries(Object.entries(by).map(([k, v]) => [k, Math.round((v / n) * 100) / 100]));
}
