/**
 * @mcp-kit/redis on a client the user made, on every wire protocol and reply mapping ioredis
 * offers: ioredis 5 speaks RESP2; ioredis 6 speaks RESP3 by default (`HELLO 3`), RESP2 with
 * `protocol: 2`, and with `replyMapping: 'resp3'` answers RESP3's maps as objects and its doubles
 * as numbers (`CONFIG GET` an object where RESP2 gives `[name, value]`). Whatever the kit reads from
 * Redis must read the same on each: the EventStore, live-tail and TaskStore contracts, a shared
 * cluster's records and bus (inbox streams, `TIME`, pub/sub on a duplicate of the client), and the
 * eviction-policy check through `CONFIG GET` where `INFO` is refused. `MCP_KIT_IOREDIS=6` runs this
 * file on ioredis 6 (vitest.config.ts); on ioredis 5 it runs the one protocol 5 has.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis, type RedisOptions } from 'ioredis';
import type { ClusterMessage, RestoreRecord } from '@mcp-kit/core';
import { createRedisScaleOut, RedisEventStore, RedisSessionCluster, RedisTaskStore, type RedisScaleOut } from '@mcp-kit/redis';
import { eventStoreContract, subscribeContract, type ContractLimits } from '../../core/test/store-contract.js';
import { taskStoreContract } from '../../core/test/task-store-contract.js';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';

/** The ioredis these tests loaded: 6 has a `protocol` option (default 3), 5 has none. */
const IOREDIS_MAJOR = 'protocol' in new Redis({ lazyConnect: true }).options ? 6 : 5;

/** The clients a user may pass, with the protocol each must speak on the wire. ioredis 5 types know none of 6's options. */
const CLIENTS: Array<{ name: string; options: Record<string, unknown>; resp: 2 | 3 }> =
  IOREDIS_MAJOR === 6
    ? [
        { name: 'RESP2 (protocol: 2)', options: { protocol: 2 }, resp: 2 },
        { name: 'RESP3 (the default)', options: {}, resp: 3 },
        { name: "RESP3 with replyMapping: 'resp3'", options: { replyMapping: 'resp3' }, resp: 3 },
      ]
    : [{ name: 'RESP2 (the only protocol of ioredis 5)', options: {}, resp: 2 }];

let redis: TestRedis;
const clients: Redis[] = [];
const closers: Array<() => Promise<void>> = [];

beforeAll(async () => {
  redis = await startRedis();
});

afterAll(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  for (const c of clients.splice(0)) c.disconnect();
  await redis?.stop();
});

function userClient(options: Record<string, unknown>, url = redis.url): Redis {
  const client = new Redis(url, options as RedisOptions);
  clients.push(client);
  return client;
}

it('the suite runs on the ioredis MCP_KIT_IOREDIS names (5 when unset)', () => {
  expect(IOREDIS_MAJOR).toBe(process.env.MCP_KIT_IOREDIS === '6' ? 6 : 5);
});

describe('what the kit refuses in a client the user made', () => {
  // Each broke the EventStore contract before: with keyPrefix ioredis prefixes a script's KEYS but
  // not the keys the scripts build nor the channels they publish on (deleteSession left the streams,
  // live tails heard nothing); with stringNumbers every integer reply is a string (every replay
  // answered "unknown").
  for (const [option, value] of [
    ['keyPrefix', 'app:'],
    ['stringNumbers', true],
  ] as const) {
    it(`${option}: a TypeError at construction that names it and the kit's own option, before anything is written`, () => {
      const client = userClient({ [option]: value, lazyConnect: true });
      const refusal = new RegExp(`\\b${option}\\b.*${option === 'keyPrefix' ? "the kit's own `keyPrefix` option" : 'numbers'}`);
      expect(() => new RedisEventStore({ client })).toThrow(refusal);
      expect(() => new RedisTaskStore({ client })).toThrow(refusal);
      expect(() => new RedisSessionCluster({ client, mode: 'shared' })).toThrow(refusal);
      expect(() => createRedisScaleOut({ client, mode: 'shared' })).toThrow(/^createRedisScaleOut:/);
      expect(client.status).toBe('wait');
    });
  }
});

for (const [index, { name, options, resp }] of CLIENTS.entries()) {
  describe(`a client the user made: ${name}`, () => {
    it(`speaks RESP${resp} to Redis`, async () => {
      const info = String(await userClient(options).call('CLIENT', 'INFO'));
      expect(info).toMatch(new RegExp(`\\bresp=${resp}\\b`));
    });

    const makeStore = async (limits: ContractLimits & { keyPrefix?: string } = {}) => {
      const store = new RedisEventStore({ client: userClient(options), ...limits });
      closers.push(() => store.close());
      await store.ready(5_000);
      return store;
    };
    eventStoreContract(`RedisEventStore on ${name}`, (limits) => makeStore(limits));
    subscribeContract(`RedisEventStore on ${name}`, (limits) => makeStore(limits));
    taskStoreContract(`RedisTaskStore on ${name}`, async () => {
      const store = new RedisTaskStore({ client: userClient(options) });
      closers.push(() => store.close());
      await store.ready(5_000);
      return store;
    });

    it('a shared cluster: a copy restored from the record, and posts between instances on the bus', async () => {
      const prefix = `shared-${resp}-${Object.keys(options).join('')}:`;
      const make = async (instanceId: string) => {
        const c = new RedisSessionCluster({ client: userClient(options), mode: 'shared', instanceId, heartbeatMs: 100, keyPrefix: prefix });
        closers.push(() => c.close());
        await c.ready(5_000);
        return c;
      };
      const a = await make('a');
      const b = await make('b');
      const record: RestoreRecord = {
        initialize: { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25' } },
        protocolVersion: '2025-11-25',
      };
      await a.open('s1', 'alice');
      await a.saveRecord('s1', record, 60_000);
      expect(await b.copies!.restore('s1', 'alice')).toEqual({ record, principal: 'alice' });
      const heard: ClusterMessage[] = [];
      b.copies!.onMessage((m) => heard.push(m));
      const ended: ClusterMessage = { kind: 'ended', sessionId: 's1' };
      // Kept in b's inbox until read: whether b's subscriber is connected yet or not, it arrives once.
      await a.copies!.post('b', ended);
      await a.copies!.post('*', ended);
      const deadline = Date.now() + 5_000;
      while (heard.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      expect(heard).toEqual([ended, ended]);
    });

    it('the eviction-policy check reads CONFIG GET where INFO is refused, and warns of an evicting policy by its name', async () => {
      // A limit of its own per client: the kit warns of each policy and limit once per process.
      const maxmemory = (64 + index) * 1024 * 1024;
      const server = await startRedis({ args: ['--maxmemory', String(maxmemory), '--maxmemory-policy', 'allkeys-lru'] });
      closers.push(() => server.stop());
      const admin = userClient({}, server.url);
      await admin.call('ACL', 'SETUSER', 'app', 'on', '>app-password', '~*', '&*', '+@all', '-info');
      const warnings: Error[] = [];
      const onWarning = (warning: Error) => warnings.push(warning);
      process.on('warning', onWarning);
      let scaleOut: RedisScaleOut | undefined;
      try {
        const client = userClient(options, server.url.replace('redis://', 'redis://app:app-password@'));
        scaleOut = createRedisScaleOut({ client, internalUrl: 'http://a.internal/mcp', instanceId: `evict-${resp}` });
        await scaleOut.ready(5_000);
        // process.emitWarning delivers on the next tick.
        await new Promise((resolve) => setImmediate(resolve));
      } finally {
        process.off('warning', onWarning);
        await scaleOut?.cluster.close();
        await scaleOut?.eventStore.close();
      }
      const eviction = warnings.filter((w) => (w as Error & { code?: string }).code === 'MCP_KIT_REDIS_EVICTION');
      expect(eviction.map((w) => w.message)).toEqual([
        expect.stringContaining(`maxmemory-policy allkeys-lru, maxmemory ${maxmemory} bytes`),
      ]);
    });
  });
}
