/**
 * The keyspace laid out for Redis Cluster (see keyspace.ts): every script and every transaction
 * mcp-kit sends touches one hash slot, so none would fail with `CROSSSLOT` on a cluster. Against
 * one real redis-server, every command each instance sends is watched: for each `EVALSHA`/`EVAL`
 * the slots of the keys it names, for each `MULTI … EXEC` those of the commands inside, computed
 * here as the cluster specification does (CRC16/XMODEM of the key's hash tag, modulo 16384).
 * Both modes are driven through what touches Redis: sessions made, written, taken over or restored,
 * records saved and changed, the bus, a data loss and the beats after it, tasks, the end.
 * The same scenarios run a second time on a real Redis Cluster (3 masters, 3 replicas): there a
 * script that touched a key it did not name, or keys of two slots, fails (`CROSSSLOT`, or "Script
 * attempted to access a non local key in a cluster node"), as does a pipeline or a transaction
 * whose keys span masters; the scenario must run through. The slot computation the kit routes
 * pipelines and subscriptions by (src/slots.ts) is checked against the cluster's own `CLUSTER KEYSLOT`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Cluster, Redis } from 'ioredis';
import type { ClusterMessage, RestoreRecord, StreamKey, TaskRecord } from '@mcp-kit/core';
import { createRedisScaleOut, type RedisScaleOut } from '@mcp-kit/redis';
import { APPEND, CLOSE, CREATE, DELETE, REPLAY, WRITER } from '../src/events/scripts.js';
import { CLAIM, RECLAIM, RELEASE, RELEASE_OWNED, SAVE_RECORD, TAKE_OVER } from '../src/cluster/owner-scripts.js';
import { END_SHARED, SAVE_SHARED, UPDATE_SHARED, WRITE_BACK } from '../src/cluster/copy-scripts.js';
import { keySlot } from '../src/slots.js';
import { redisCommand } from '@mcp-kit/testbed/redis-command';
import { startRedis } from '@mcp-kit/testbed/redis';
import { startRedisCluster } from '@mcp-kit/testbed/redis-cluster';
import { until } from '@mcp-kit/testbed/processes';

interface Watched {
  /** The command (`EVALSHA <sha>`, or `MULTI`), its keys and their slots. */
  what: string;
  keys: string[];
  slots: Set<number>;
}

/** Every script and transaction `client` sends, with the slots of its keys. */
function watch(client: Redis | Cluster): Watched[] {
  const seen: Watched[] = [];
  let transaction: Watched | undefined;
  const send = client.sendCommand.bind(client) as Redis['sendCommand'];
  client.sendCommand = ((...args: Parameters<Redis['sendCommand']>) => {
    const [command] = args;
    const name = command.name.toLowerCase();
    const keys = command.getKeys().map(String);
    if (name === 'multi') transaction = { what: 'MULTI', keys: [], slots: new Set() };
    else if (name === 'exec' && transaction) {
      seen.push(transaction);
      transaction = undefined;
    } else if (transaction) {
      transaction.keys.push(...keys);
      for (const key of keys) transaction.slots.add(keySlot(key));
    } else if (name === 'evalsha' || name === 'eval') {
      const what = name === 'evalsha' ? `EVALSHA ${String(command.args[0])}` : 'EVAL';
      seen.push({ what, keys, slots: new Set(keys.map(keySlot)) });
    }
    return send(...args);
  }) as typeof client.sendCommand;
  return seen;
}

/** How a script is sent: with classic PUBLISH on one node, SPUBLISH on a cluster (the same when it publishes nothing). */
const sha = (script: unknown, onCluster = false) => (script as { sha: string; shardedSha: string })[onCluster ? 'shardedSha' : 'sha'];

const record = (name: string): RestoreRecord => ({
  initialize: { jsonrpc: '2.0', id: 1, method: 'initialize', params: { capabilities: {}, clientInfo: { name, version: '1' } } },
  protocolVersion: '2025-11-25',
});
const frame = (key: StreamKey, seq: number) => `id: ${key.streamId}.${seq}\ndata: {"seq":${seq}}\n\n`;

/** Where the scenarios run: one redis-server, or a Redis Cluster; what the test does to it directly. */
interface Topology {
  /** A client for one instance, as a user would make it. */
  client(): Redis | Cluster;
  /** An instance's liveness goes, as when it stops beating: its key and, on a cluster, its presence in every shard. */
  forget(prefix: string, instanceId: string): Promise<void>;
  /** Redis loses all its data (every master, on a cluster). */
  flushAll(): Promise<void>;
  /** Every subscriber connection is cut (a gap on the bus). */
  killSubscribers(): Promise<void>;
  close(): Promise<void>;
}

async function oneNode(): Promise<Topology> {
  const redis = await startRedis();
  const admin = new Redis(redis.url);
  return {
    client: () => new Redis(redis.url),
    forget: async (prefix, instanceId) => void (await admin.del(`${prefix}instance:${instanceId}`)),
    flushAll: async () => void (await admin.flushall()),
    killSubscribers: async () => void (await admin.client('KILL', 'TYPE', 'pubsub')),
    async close() {
      admin.disconnect();
      await redis.stop();
    },
  };
}

async function redisCluster(): Promise<Topology> {
  const cluster = await startRedisCluster();
  const admin = new Cluster(cluster.seeds);
  admin.on('error', () => {});
  return {
    client: () => new Cluster(cluster.seeds),
    forget: async (prefix, instanceId) => {
      for (const master of await cluster.masters())
        for (const key of (await redisCommand(master.port, 'KEYS', `${prefix}*instance:${instanceId}`)) as string[])
          await redisCommand(master.port, 'DEL', key);
    },
    flushAll: async () => {
      for (const master of await cluster.masters()) await redisCommand(master.port, 'FLUSHALL');
    },
    killSubscribers: async () => {
      for (const node of cluster.nodes) await redisCommand(node.port, 'CLIENT', 'KILL', 'TYPE', 'pubsub');
    },
    async close() {
      admin.disconnect();
      await cluster.close();
    },
  };
}

const TOPOLOGIES: Array<{ name: string; start: () => Promise<Topology> }> = [
  { name: 'one redis-server', start: oneNode },
  { name: 'a Redis Cluster (3 masters, 3 replicas)', start: redisCluster },
];

async function instance(
  topology: Topology,
  scaleOuts: RedisScaleOut[],
  clients: Array<Redis | Cluster>,
  name: string,
  prefix: string,
  shared: boolean,
): Promise<{ s: RedisScaleOut; seen: Watched[] }> {
  const client = topology.client();
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
  await s.ready(10_000);
  return { s, seen };
}

function expectOneSlotEach(seen: Watched[]): void {
  const crossing = seen.filter((w) => w.slots.size > 1).map((w) => `${w.what}: ${w.keys.join(' ')}`);
  expect(crossing).toEqual([]);
}

describe.each(TOPOLOGIES)('every script and transaction touches one slot: $name', ({ name: where, start }) => {
  let topology: Topology;
  const scaleOuts: RedisScaleOut[] = [];
  const clients: Array<Redis | Cluster> = [];
  const onCluster = where.includes('Cluster');
  const make = (name: string, prefix: string, shared: boolean) => instance(topology, scaleOuts, clients, name, prefix, shared);

  beforeAll(async () => {
    topology = await start();
  }, 60_000);

  afterAll(async () => {
    for (const s of scaleOuts) {
      await s.cluster.close();
      await s.eventStore.close();
    }
    for (const client of clients) client.disconnect();
    await topology?.close();
  });

  it('forwarding: sessions written, closed, replayed, taken over, released; a data loss and the beats after it; the end', async () => {
    const a = await make('a', 'fs:', false);
    const b = await make('b', 'fs:', false);
    const c = await make('c', 'fs:', false);
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
    await topology.forget('fs:', 'a');
    expect(await c.s.cluster.owners!.takeOver(key.sessionId, 'alice')).toMatchObject({ principal: 'alice' });
    const [lost] = await c.s.eventStore.unfinished(key.sessionId);
    await c.s.eventStore.append(key, lost!.lastSeq + 1, frame(key, lost!.lastSeq + 1), true);
    // A, stale: its frame 4 is the one C stored (one frame per seq), its frame 5 goes after a final one.
    await a.s.eventStore.append(key, 4, frame(key, 4), false);
    await expect(a.s.eventStore.append(key, 5, frame(key, 5), false)).rejects.toMatchObject({ name: 'StreamTakenOver' });
    await b.s.cluster.owners!.peers();
    // Redis loses its data: the beats write the records back; a new session is saved and handed off.
    await a.s.cluster.open('fwd-2', undefined);
    await topology.flushAll();
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
      expect(used).toContain(`EVALSHA ${sha(script, onCluster)}`);
  });

  it('shared: records saved and changed by copies, the bus, a gap, a data loss, the end; tasks', async () => {
    const a = await make('sa', 'ss:', true);
    const b = await make('sb', 'ss:', true);
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
    await until(
      async () => (heard.length > 0 ? true : undefined),
      5_000,
      () => 'the cancel posted to b never reached it',
    );
    // A gap on b's bus, then a data loss: b checks its copies and writes its record back.
    await topology.killSubscribers();
    await topology.flushAll();
    await b.s.cluster.confirmHeld();
    await (b.s.cluster as unknown as { registry: { heartbeat(): Promise<void> } }).registry.heartbeat();
    await b.s.cluster.end('shr-1');
    await b.s.eventStore.deleteSession('shr-1');
    // Tasks: each one's keys under its own hash tag.
    const task: TaskRecord = {
      taskId: 'task-1',
      status: 'working',
      createdAt: 1,
      lastUpdatedAt: 1,
      ttlMs: 60_000,
      owner: 'sa',
      principal: undefined,
    };
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
    for (const script of [SAVE_SHARED, UPDATE_SHARED, END_SHARED, WRITE_BACK]) expect(used).toContain(`EVALSHA ${sha(script, onCluster)}`);
    // A cluster client's transactions go to their node as a pipeline, past the watch (ioredis
    // refuses one whose keys span slots): seen on one node only.
    if (!onCluster) expect(used).toContain('MULTI');
  });
});

describe('the slot computation', () => {
  it("agrees with a Redis Cluster's own CLUSTER KEYSLOT", async () => {
    const cluster = await startRedisCluster();
    try {
      for (const key of [
        'foo',
        'mcp-kit:{abc}:s',
        'mcp-kit:{abc}:stream',
        'mcp-kit:task:{t1}:input',
        '{}x',
        'a{}b{c}',
        'mcp-kit:{instances}',
        'mcp-kit:{12}:generation',
        '☃ key',
      ])
        expect(keySlot(key), key).toBe(await cluster.slotOf(key));
    } finally {
      await cluster.close();
    }
  }, 60_000);
});
