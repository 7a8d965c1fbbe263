/**
 * @mcp-kit/redis on a real Redis Cluster (packages/testbed/src/redis-cluster.ts: 3 masters, 3
 * replicas on loopback), through `createRedisScaleOut({ redisCluster })` as a user would:
 * sessions of both modes spread over the masters; a live tail on another instance and the shared
 * bus over sharded pub/sub (nothing of it on the masters of other slots); the pipelines over many
 * sessions (records kept, streams refreshed, copies checked) one per master; the slot of a live
 * tail moved to another master while it streams; a shard that loses its data found by its own
 * generation; an instance whose liveness key a failover lost, alive by its presences in the other
 * shards; scripts a new master does not know (NOSCRIPT); the eviction policy of every master;
 * 10,000 sessions spread over the masters, their keys and their scripts a third on each.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Cluster } from 'ioredis';
import type { ClusterMessage, RestoreRecord, StreamKey, StreamListener } from '@mcp-kit/core';
import { createRedisScaleOut, type RedisScaleOut } from '@mcp-kit/redis';
import { redisCommand } from '@mcp-kit/testbed/redis-command';
import { startRedisCluster, type TestRedisCluster } from '@mcp-kit/testbed/redis-cluster';
import { keySlot } from '../src/slots.js';

let rc: TestRedisCluster;
let admin: Cluster;
let scaleOuts: RedisScaleOut[] = [];

beforeAll(async () => {
  rc = await startRedisCluster();
  admin = new Cluster(rc.seeds);
  admin.on('error', () => {});
}, 60_000);

afterEach(async () => {
  for (const s of scaleOuts) {
    await s.cluster.close();
    await s.eventStore.close();
  }
  scaleOuts = [];
});

afterAll(async () => {
  admin?.disconnect();
  await rc?.close();
});

async function instance(name: string, mode: 'forward' | 'shared', prefix: string, heartbeatMs = 60_000): Promise<RedisScaleOut> {
  const s = createRedisScaleOut({
    redisCluster: { nodes: rc.seeds },
    instanceId: name,
    keyPrefix: prefix,
    heartbeatMs,
    ...(mode === 'shared' ? { mode } : { internalUrl: `http://${name}.internal/mcp` }),
  });
  scaleOuts.push(s);
  await s.ready(10_000);
  return s;
}

const record = (): RestoreRecord => ({
  initialize: { jsonrpc: '2.0', id: 1, method: 'initialize', params: { capabilities: {}, clientInfo: { name: 'c', version: '1' } } },
  protocolVersion: '2025-11-25',
});
const streamOf = (sessionId: string): StreamKey => ({ sessionId, streamId: 'stream'.padEnd(22, '0') });
const heartbeat = (s: RedisScaleOut) => (s.cluster as unknown as { registry: { heartbeat(): Promise<void> } }).registry.heartbeat();

/** A live tail that records what it hears. */
function tail(): StreamListener & { frames: string[]; ended: string[] } {
  const heard = { frames: [] as string[], ended: [] as string[] };
  return Object.assign(heard, {
    frame: (frame: string) => void heard.frames.push(frame),
    end: (reason: string) => void heard.ended.push(reason),
    closed: () => void heard.ended.push('closed'),
  });
}

async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A session id whose keys are in a slot `master` serves. */
async function sessionOn(master: { port: number }, prefix: string, name: string): Promise<string> {
  for (let n = 0; ; n++) {
    const id = `${name}-${n}`;
    if ((await rc.masterOf(keySlot(`${prefix}{${id}}:s`))).port === master.port) return id;
  }
}

/** Each master's `INFO commandstats` count of `command` (e.g. `spublish`). */
async function callsPerMaster(command: string): Promise<number[]> {
  const counts = [];
  for (const master of await rc.masters()) {
    const info = String(await redisCommand(master.port, 'INFO', 'commandstats'));
    counts.push(Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(info)?.[1] ?? 0));
  }
  return counts;
}

describe('@mcp-kit/redis on a Redis Cluster', () => {
  it('forwarding: sessions on every master, a live tail on another instance over sharded pub/sub, records kept one pipeline per master', async () => {
    const a = await instance('fa', 'forward', 'f1:');
    const b = await instance('fb', 'forward', 'f1:');
    const masters = await rc.masters();
    const sessions = await Promise.all(masters.map((m, i) => sessionOn(m, 'f1:', `fwd${i}`)));
    const publishedBefore = await callsPerMaster('publish');
    for (const id of sessions) {
      await a.cluster.open(id, undefined);
      await a.cluster.saveRecord(id, record(), 60_000);
      const key = streamOf(id);
      await a.eventStore.createStream(key, [1]);
      await a.eventStore.append(key, 1, 'frame 1', false);
      const heard = tail();
      await b.eventStore.subscribe(key, 0, heard);
      for (let seq = 2; seq <= 5; seq++) await a.eventStore.append(key, seq, `frame ${seq}`, seq === 5);
      await until(() => heard.frames.length === 5, `the tail of ${id}`);
      expect(heard.frames).toEqual(['frame 1', 'frame 2', 'frame 3', 'frame 4', 'frame 5']);
      expect((await b.cluster.owners!.lookupOwner(id))?.instanceId).toBe('fa');
    }
    // Sharded: no classic PUBLISH went to any master; each master's SPUBLISH count grew.
    expect(await callsPerMaster('publish')).toEqual(publishedBefore);
    expect((await callsPerMaster('spublish')).every((n) => n > 0)).toBe(true);
    // One pipeline per master: the records of sessions on three masters are kept in one call.
    await a.cluster.keepRecords(sessions, 120_000);
    for (const id of sessions) expect(await admin.pttl(`f1:{${id}}:s`)).toBeGreaterThan(60_000);
  });

  it('shared: a message posted through one instance reaches the copy on another (sharded), each once', async () => {
    const a = await instance('sa', 'shared', 's1:');
    const b = await instance('sb', 'shared', 's1:');
    const heard: ClusterMessage[] = [];
    b.cluster.copies!.onMessage((m) => heard.push(m));
    const masters = await rc.masters();
    const sessions = await Promise.all(masters.map((m, i) => sessionOn(m, 's1:', `shr${i}`)));
    for (const id of sessions) {
      await a.cluster.open(id, undefined);
      await a.cluster.saveRecord(id, record(), 60_000);
      expect(await b.cluster.copies!.restore(id, undefined)).toMatchObject({ record: record() });
    }
    for (const id of sessions)
      await a.cluster.copies!.post('sb', { kind: 'cancel', sessionId: id, message: { jsonrpc: '2.0', method: 'notifications/cancelled' } });
    await until(() => heard.length === sessions.length, 'the messages');
    expect(heard.map((m) => m.sessionId).sort()).toEqual([...sessions].sort());
    // A check of the copies (after a gap): one HEXISTS pipeline per master, every copy still there.
    (b.cluster as unknown as { mode: { busGap: boolean } }).mode.busGap = true;
    await b.cluster.confirmHeld();
    expect(await b.cluster.copies!.restore(sessions[0]!, undefined)).toMatchObject({ record: record() });
  });

  it('a live tail whose slot moves to another master mid-stream hears every frame once, in order (ASK redirections in flight)', async () => {
    const a = await instance('ma', 'forward', 'm1:');
    const b = await instance('mb', 'forward', 'm1:');
    const [from] = await rc.masters();
    const id = await sessionOn(from!, 'm1:', 'moving');
    const key = streamOf(id);
    await a.cluster.open(id, undefined);
    await a.eventStore.createStream(key, [1]);
    await a.eventStore.append(key, 1, 'frame 1', false);
    const heard = tail();
    await b.eventStore.subscribe(key, 0, heard);
    let seq = 1;
    const writing = (async () => {
      for (seq = 2; seq <= 60; seq++) {
        await a.eventStore.append(key, seq, `frame ${seq}`, seq === 60);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    })();
    const slot = keySlot(`m1:{${id}}:s`);
    const to = (await rc.masters()).find((m) => m.port !== from!.port)!;
    // One key a batch: the stream moves before the session's hash, so appends meet ASK (the
    // stream on the new master) and TRYAGAIN (its two keys split) while the slot migrates.
    await rc.migrateSlot(slot, to, { batch: 1, betweenBatches: () => new Promise((resolve) => setTimeout(resolve, 50)) });
    expect((await rc.masterOf(slot)).port).toBe(to.port);
    await writing;
    await until(() => heard.frames.length === 60 || heard.ended.length > 0, 'the tail to hear frame 60');
    expect(heard.ended).toEqual([]);
    expect(heard.frames).toEqual(Array.from({ length: 60 }, (_, i) => `frame ${i + 1}`));
  });

  it('a shard that lost its data is found by its own generation: the owner writes its record back there, and only there', async () => {
    const a = await instance('la', 'forward', 'l1:');
    const masters = await rc.masters();
    const sessions = await Promise.all(masters.map((m, i) => sessionOn(m, 'l1:', `lost${i}`)));
    for (const id of sessions) {
      await a.cluster.open(id, undefined);
      await a.cluster.saveRecord(id, record(), 60_000);
    }
    // A master that holds neither the instance's liveness key nor the key of one generation for all
    // loses its data: only that shard's own presence and generation tell (before them, nothing did:
    // the record stayed gone and its next write was refused as the session's end).
    const elsewhere = [await rc.masterOf(keySlot('l1:instance:la')), await rc.masterOf(keySlot('l1:generation'))];
    const lost = masters.find((m) => !elsewhere.some((e) => e.port === m.port)) ?? masters.find((m) => m.port !== elsewhere[0]!.port)!;
    const lostSession = sessions[masters.indexOf(lost)]!;
    // The master restarts empty (FLUSHALL stands for it: its replica follows it empty too).
    await redisCommand(lost.port, 'FLUSHALL');
    expect(await admin.exists(`l1:{${lostSession}}:s`)).toBe(0);
    await heartbeat(a);
    expect(await admin.hmget(`l1:{${lostSession}}:s`, 'o', 'u')).toEqual(['la', 'http://la.internal/mcp']);
    // Its owner writes again, fenced as before: the shard's data came back under its new generation.
    await a.cluster.saveRecord(lostSession, record(), 60_000);
    expect(await admin.hexists(`l1:{${lostSession}}:s`, 'r')).toBe(1);
  });

  it('an instance whose liveness key a failover lost still counts as alive while its presences in the other shards are fresh', async () => {
    const a = await instance('va', 'forward', 'v1:');
    await instance('vb', 'forward', 'v1:');
    const gone = await instance('vc', 'forward', 'v1:');
    // The master of vb's liveness key fails over to a replica that lacks it: the key expired while the
    // cluster found the master down (three heartbeats are shorter than cluster-node-timeout), or the
    // replica lagged. DEL stands for that loss; vb itself lives, its presence in every shard is there.
    const master = await rc.masterOf(keySlot('v1:instance:vb'));
    expect(await redisCommand(master.port, 'DEL', 'v1:instance:vb')).toBe(1);
    expect(await a.cluster.instanceAlive!('vb')).toBe(true);
    // An instance that left has no presence anywhere: gone at once.
    await gone.cluster.close();
    expect(await a.cluster.instanceAlive!('vc')).toBe(false);
  });

  it('10,000 sessions spread over the three masters: each holds a third of their keys, and runs a third of their scripts, within ±15%', async () => {
    const a = await instance('ka', 'forward', 'k1:');
    const masters = await rc.masters();
    const keys = () => Promise.all(masters.map(async (m) => Number(await redisCommand(m.port, 'DBSIZE'))));
    const scripts = () =>
      Promise.all(
        masters.map(async (m) =>
          Number(/cmdstat_evalsha:calls=(\d+)/.exec(String(await redisCommand(m.port, 'INFO', 'commandstats')))?.[1] ?? 0),
        ),
      );
    const [keysBefore, scriptsBefore] = [await keys(), await scripts()];
    const sessions = 10_000;
    for (let i = 0; i < sessions; i += 500)
      await Promise.all(
        Array.from({ length: 500 }, async (_, k) => {
          const id = `spread-${i + k}`;
          await a.cluster.open(id, undefined);
          await a.cluster.saveRecord(id, record(), 60_000);
        }),
      );
    const [keysAfter, scriptsAfter] = [await keys(), await scripts()];
    const newKeys = keysAfter.map((n, i) => n - keysBefore[i]!);
    const ran = scriptsAfter.map((n, i) => n - scriptsBefore[i]!);
    console.log(`[spread] new keys per master ${newKeys.join(' / ')}; scripts run per master ${ran.join(' / ')}`);
    expect(newKeys.reduce((s, n) => s + n, 0)).toBe(sessions);
    for (const n of newKeys) expect(Math.abs(n - sessions / 3)).toBeLessThanOrEqual((0.15 * sessions) / 3);
    const total = ran.reduce((s, n) => s + n, 0);
    expect(total).toBeGreaterThanOrEqual(2 * sessions);
    for (const n of ran) expect(Math.abs(n - total / 3)).toBeLessThanOrEqual((0.15 * total) / 3);
  }, 120_000);

  it('the eviction policy is read on every master: one that may evict is warned of by its policy', async () => {
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    const [, second] = await rc.masters();
    await redisCommand(second!.port, 'CONFIG', 'SET', 'maxmemory', '987654321');
    await redisCommand(second!.port, 'CONFIG', 'SET', 'maxmemory-policy', 'volatile-ttl');
    try {
      await instance('ea', 'forward', 'e1:');
      // process.emitWarning delivers on the next tick.
      await until(() => warnings.some((w) => /volatile-ttl/.test(w.message)), 'the warning');
      expect(warnings.find((w) => /volatile-ttl/.test(w.message))).toMatchObject({ code: 'MCP_KIT_REDIS_EVICTION' });
      expect(warnings.find((w) => /volatile-ttl/.test(w.message))?.message).toContain('987654321');
    } finally {
      process.off('warning', onWarning);
      await redisCommand(second!.port, 'CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
      await redisCommand(second!.port, 'CONFIG', 'SET', 'maxmemory', '0');
    }
  });

  it('scripts a master does not know (a promoted replica, a restarted node) are loaded again where they run', async () => {
    const a = await instance('na', 'forward', 'n1:');
    const masters = await rc.masters();
    const sessions = await Promise.all(masters.map((m, i) => sessionOn(m, 'n1:', `noscript${i}`)));
    for (const master of masters) await redisCommand(master.port, 'SCRIPT', 'FLUSH');
    for (const id of sessions) {
      await a.cluster.open(id, undefined);
      await a.eventStore.createStream(streamOf(id), [1]);
      await a.eventStore.append(streamOf(id), 1, 'frame 1', true);
      expect(await a.eventStore.replayAfter(id, streamOf(id).streamId, 0)).toMatchObject({ ok: true, frames: ['frame 1'] });
    }
  });
});
