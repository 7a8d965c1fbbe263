/**
 * The keyspace laid out for Redis Cluster (see keyspace.ts): every script and every transaction
 * mcp-kit sends touches one hash slot, so none would fail with `CROSSSLOT` on a cluster. Against
 * one real redis-server, every command each instance sends is watched: for each `EVALSHA`/`EVAL`
 * the slots of the keys it names, for each `MULTI … EXEC` those of the commands inside, computed
 * here as the cluster specification does (CRC16/XMODEM of the key's hash tag, modulo 16384).
 * Both modes are driven through what touches Redis: sessions made, written, taken over or restored,
 * records saved and changed, the bus, a data loss and the beats after it, tasks, the end.
 * (Scripts name every key they touch in `KEYS`; that the keys they name are all they touch is
 * what only a real Redis Cluster checks.)
 */
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import type { ClusterMessage, RestoreRecord, StreamKey, TaskRecord } from '@mcp-kit/core';
import { createRedisScaleOut, type RedisScaleOut } from '@mcp-kit/redis';
import { APPEND, CLOSE, CREATE, DELETE, REPLAY, WRITER } from '../src/events/scripts.js';
import { CLAIM, RECLAIM, RELEASE, RELEASE_OWNED, SAVE_RECORD, TAKE_OVER } from '../src/cluster/owner-scripts.js';
import { END_SHARED, SAVE_SHARED, UPDATE_SHARED, WRITE_BACK } from '../src/cluster/copy-scripts.js';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';

/** CRC16/XMODEM (polynomial 0x1021, no reflection, initial 0), what Redis Cluster hashes keys with. */
function crc16(bytes: Buffer): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

/** A key's slot: of its hash tag (what is between the first `{` and the first `}` after it, if not empty), else of the whole key. */
function slotOf(key: string | Buffer): number {
  const bytes = Buffer.isBuffer(key) ? key : Buffer.from(key);
  const open = bytes.indexOf('{');
  if (open >= 0) {
    const close = bytes.indexOf('}', open + 1);
    if (close > open + 1) return crc16(bytes.subarray(open + 1, close)) % 16384;
  }
  return crc16(bytes) % 16384;
}

interface Watched {
  /** The command (`EVALSHA <sha>`, or `MULTI`), its keys and their slots. */
  what: string;
  keys: string[];
  slots: Set<number>;
}

/** Every script and transaction `client` sends, with the slots of its keys. */
function watch(client: Redis): Watched[] {
  const seen: Watched[] = [];
  let transaction: Watched | undefined;
  const send = client.sendCommand.bind(client);
  client.sendCommand = ((...args: Parameters<typeof send>) => {
    const [command] = args;
    const name = command.name.toLowerCase();
    const keys = command.getKeys().map(String);
    if (name === 'multi') transaction = { what: 'MULTI', keys: [], slots: new Set() };
    else if (name === 'exec' && transaction) {
      seen.push(transaction);
      transaction = undefined;
    } else if (transaction) {
      transaction.keys.push(...keys);
      for (const key of keys) transaction.slots.add(slotOf(key));
    } else if (name === 'evalsha' || name === 'eval') {
      const what = name === 'evalsha' ? `EVALSHA ${String(command.args[0])}` : 'EVAL';
      seen.push({ what, keys, slots: new Set(keys.map(slotOf)) });
    }
    return send(...args);
  }) as typeof send;
  return seen;
}

const sha = (script: unknown) => (script as { sha: string }).sha;

const record = (name: string): RestoreRecord => ({
  initialize: { jsonrpc: '2.0', id: 1, method: 'initialize', params: { capabilities: {}, clientInfo: { name, version: '1' } } },
  protocolVersion: '2025-11-25',
});
const frame = (key: StreamKey, seq: number) => `id: ${key.streamId}.${seq}\ndata: {"seq":${seq}}\n\n`;

let redis: TestRedis;
let admin: Redis;
const scaleOuts: RedisScaleOut[] = [];
const clients: Redis[] = [];

beforeAll(async () => {
  redis = await startRedis();
  admin = new Redis(redis.url);
});

afterAll(async () => {
  for (const s of scaleOuts) {
    await s.cluster.close();
    await s.eventStore.close();
  }
  for (const client of clients) client.disconnect();
  admin?.disconnect();
  await redis?.stop();
});

async function instance(name: string, prefix: string, shared: boolean): Promise<{ s: RedisScaleOut; seen: Watched[] }> {
  const client = new Redis(redis.url);
  client.on('error', () => {});
  clients.push(client);
  const seen = watch(client);
  const s = createRedisScaleOut({
    client,
    keyPrefix: prefix,
    instanceId: name,
    // Beats by hand (the first at ready()): the order of events is the test's.
    heartbeatMs: 60_000,
    ...(shared ? { mode: 'shared' as const } : { internalUrl: `http://${name}.internal/mcp` }),
  });
  scaleOuts.push(s);
  await s.ready(5_000);
  return { s, seen };
}

function expectOneSlotEach(seen: Watched[]): void {
  const crossing = seen.filter((w) => w.slots.size > 1).map((w) => `${w.what}: ${w.keys.join(' ')}`);
  expect(crossing).toEqual([]);
}

describe('every script and transaction touches one slot', () => {
  it('forwarding: sessions written, closed, replayed, taken over, released; a data loss and the beats after it; the end', async () => {
    const a = await instance('a', 'fs:', false);
    const b = await instance('b', 'fs:', false);
    const c = await instance('c', 'fs:', false);
    const key: StreamKey = { sessionId: 'fwd-1', streamId: 'stream-1'.padEnd(22, '0') };
    const one: StreamKey = { sessionId: 'fwd-1', streamId: 'stream-2'.padEnd(22, '0') };
    await a.s.cluster.open(key.sessionId, 'alice');
    await a.s.cluster.saveRecord(key.sessionId, record('a'), 60_000);
    await a.s.eventStore.createStream(key, [7]);
    for (let seq = 1; seq <= 3; seq++) await a.s.eventStore.append(key, seq, frame(key, seq), false);
    await a.s.eventStore.closeTails(key, 3, 1_000);
    await a.s.eventStore.createStream(one, [8]);
    await a.s.eventStore.append(one, 1, frame(one, 1), true);
    await b.s.eventStore.replayAfter(key.sessionId, key.streamId, 1);
    await b.s.eventStore.writer(key);
    await b.s.cluster.owners!.lookupOwner(key.sessionId);
    await b.s.cluster.touch(key.sessionId);
    await a.s.cluster.activeElsewhere(key.sessionId);
    await a.s.cluster.keepRecords([key.sessionId], 60_000);
    // A is gone for C: C takes the session over and answers A's lost call.
    await admin.del('fs:instance:a');
    expect(await c.s.cluster.owners!.takeOver(key.sessionId, 'alice')).toMatchObject({ principal: 'alice' });
    const [lost] = await c.s.eventStore.unfinished(key.sessionId);
    await c.s.eventStore.append(key, lost!.lastSeq + 1, frame(key, lost!.lastSeq + 1), true);
    // A, stale: its frame 4 is the one C stored (one frame per seq), its frame 5 goes after a final one.
    await a.s.eventStore.append(key, 4, frame(key, 4), false);
    await expect(a.s.eventStore.append(key, 5, frame(key, 5), false)).rejects.toMatchObject({ name: 'StreamTakenOver' });
    await b.s.cluster.owners!.peers();
    // Redis loses its data: the beats write the records back; a new session is saved and handed off.
    await a.s.cluster.open('fwd-2', undefined);
    await admin.flushall();
    await (a.s.cluster as unknown as { registry: { heartbeat(): Promise<void> } }).registry.heartbeat();
    await (c.s.cluster as unknown as { registry: { heartbeat(): Promise<void> } }).registry.heartbeat();
    await a.s.cluster.saveRecord('fwd-2', record('a'), 60_000);
    await a.s.cluster.letGo('fwd-2');
    expect(await c.s.cluster.end(key.sessionId)).toBe(true);
    await c.s.eventStore.deleteSession(key.sessionId);
    await a.s.cluster.open('fwd-3', undefined);
    for (const x of [a, b, c]) await x.s.cluster.close();
    const all = [...a.seen, ...b.seen, ...c.seen];
    expectOneSlotEach(all);
    const used = new Set(all.map((w) => w.what));
    for (const script of [CREATE, APPEND, CLOSE, REPLAY, WRITER, DELETE, CLAIM, TAKE_OVER, RECLAIM, SAVE_RECORD, RELEASE, RELEASE_OWNED])
      expect(used).toContain(`EVALSHA ${sha(script)}`);
  });

  it('shared: records saved and changed by copies, the bus, a gap, a data loss, the end; tasks', async () => {
    const a = await instance('sa', 'ss:', true);
    const b = await instance('sb', 'ss:', true);
    const heard: ClusterMessage[] = [];
    b.s.cluster.copies!.onMessage((m) => heard.push(m));
    await a.s.cluster.open('shr-1', 'bob');
    await a.s.eventStore.createStream({ sessionId: 'shr-1', streamId: 'init'.padEnd(22, '0') }, [0]);
    await a.s.cluster.saveRecord('shr-1', record('a'), 60_000);
    expect(await b.s.cluster.copies!.restore('shr-1', 'bob')).toMatchObject({ principal: 'bob' });
    await b.s.cluster.saveRecord('shr-1', record('b'), 60_000, { method: 'logging/setLevel', params: { level: 'info' } });
    await a.s.cluster.copies!.post('sb', {
      kind: 'cancel',
      sessionId: 'shr-1',
      message: { jsonrpc: '2.0', method: 'notifications/cancelled' },
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    // A gap on b's bus, then a data loss: b checks its copies and writes its record back.
    await admin.client('KILL', 'TYPE', 'pubsub');
    await admin.flushall();
    await b.s.cluster.confirmHeld();
    await (b.s.cluster as unknown as { registry: { heartbeat(): Promise<void> } }).registry.heartbeat();
    await b.s.cluster.end('shr-1');
    await b.s.eventStore.deleteSession('shr-1');
    // Tasks: each one's keys under its own hash tag.
    const task: TaskRecord = { taskId: 'task-1', status: 'working', createdAt: 1, lastUpdatedAt: 1, ttlMs: 60_000, owner: 'sa' };
    await a.s.taskStore.create(task);
    await a.s.taskStore.update('task-1', { status: 'input_required', inputRequests: { q: { method: 'elicitation/create' } } });
    await b.s.taskStore.answer('task-1', { q: { action: 'accept' } });
    await b.s.taskStore.get('task-1');
    await b.s.taskStore.cancel('task-1', 'no more');
    await a.s.cluster.close();
    await b.s.cluster.close();
    const all = [...a.seen, ...b.seen];
    expectOneSlotEach(all);
    const used = new Set(all.map((w) => w.what));
    for (const script of [SAVE_SHARED, UPDATE_SHARED, END_SHARED, WRITE_BACK]) expect(used).toContain(`EVALSHA ${sha(script)}`);
    expect(used).toContain('MULTI');
  });
});

describe('the slot computation', () => {
  it("agrees with Redis' own CLUSTER KEYSLOT on a cluster-enabled server", async () => {
    // Its cluster state file goes to the system's temp dir, not the working directory.
    const config = join(tmpdir(), `mcp-kit-slots-${process.pid}-${Date.now()}.conf`);
    const node = await startRedis({ args: ['--cluster-enabled', 'yes', '--cluster-config-file', config] });
    const client = new Redis(node.url);
    try {
      for (const key of [
        'foo',
        'mcp-kit:{abc}:s',
        'mcp-kit:{abc}:stream',
        'mcp-kit:task:{t1}:input',
        '{}x',
        'a{}b{c}',
        'mcp-kit:{instances}',
        '☃ key',
      ])
        expect(slotOf(key), key).toBe(await client.call('CLUSTER', 'KEYSLOT', key));
    } finally {
      client.disconnect();
      await node.stop();
      rmSync(config, { force: true });
    }
  });
});
