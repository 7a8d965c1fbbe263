/**
 * A rolling deploy from the keyspace before 0.2 (`<prefix>owner:<id>`, `<prefix>restore:<id>`,
 * the set `<prefix>{<id>}` of a session's streams and each stream's `:req`), against a real
 * redis-server: live sessions survive it. What an old instance leaves in Redis is written here as
 * its code wrote it (the JSON of `owner:` and `restore:`, the stream's `0-1` entry); this
 * version's instances then find those sessions: forwarding to their old owner while it beats,
 * moving them over (as a take-over, their calls' streams fenced and their lost calls answered)
 * once it is gone; restoring them from their old record in a shared cluster; and serving their client's next request.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { createMcpHandler, handleNodeRequest, type RestoreRecord } from '@mcp-kit/core';
import { createFixtureServer } from '@mcp-kit/fixtures';
import { createRedisScaleOut, type ClusterMode, type RedisScaleOut } from '@mcp-kit/redis';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';
import { http } from '@mcp-kit/testbed/fetch-client';

let redis: TestRedis;
let admin: Redis;
const scaleOuts: RedisScaleOut[] = [];

beforeAll(async () => {
  redis = await startRedis();
  admin = new Redis(redis.url);
});

afterAll(async () => {
  for (const s of scaleOuts) {
    await s.cluster.close();
    await s.eventStore.close();
  }
  admin?.disconnect();
  await redis?.stop();
});

async function instance(name: string, prefix: string, mode: ClusterMode): Promise<RedisScaleOut> {
  const s = createRedisScaleOut({
    url: redis.url,
    keyPrefix: prefix,
    instanceId: name,
    heartbeatMs: 60_000,
    ...(mode === 'shared' ? { mode } : { internalUrl: `http://${name}.internal/mcp` }),
  });
  scaleOuts.push(s);
  await s.ready(5_000);
  return s;
}

const record: RestoreRecord = {
  initialize: {
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'old-client', version: '1' } },
  },
  protocolVersion: '2025-11-25',
};

/**
 * What an instance of the version before 0.2 wrote for a session it created (`claim`,
 * `saveRecord`) and a call running in it (`createStream` with request 7, two frames).
 */
async function oldSession(prefix: string, sessionId: string, owner: { id: string; url: string; alive: boolean }, streamId?: string) {
  await admin.set(`${prefix}owner:${sessionId}`, JSON.stringify({ i: owner.id, u: owner.url, p: null }), 'PX', 24 * 60 * 60_000);
  await admin.set(`${prefix}restore:${sessionId}`, JSON.stringify({ p: null, r: record }), 'PX', 60 * 60_000);
  if (owner.alive) await admin.set(`${prefix}instance:${owner.id}`, owner.url, 'PX', 60_000);
  if (!streamId) return;
  const stream = `${prefix}{${sessionId}}:${streamId}`;
  await admin.xadd(stream, 'MAXLEN', '10000', '0-1', 'c', '1');
  for (let seq = 1; seq <= 2; seq++)
    await admin.xadd(stream, 'MAXLEN', '10000', `${seq}-0`, 'f', `id: ${streamId}.${seq}\ndata: {}\n\n`, 'e', '0');
  await admin.set(`${stream}:req`, JSON.stringify([7]), 'PX', 900_000);
  await admin.sadd(`${prefix}{${sessionId}}`, streamId);
}

describe('a rolling deploy from the keyspace before 0.2', () => {
  it('forwarding: a session whose old owner beats is forwarded to it', async () => {
    const b = await instance('b1', 'lg1:', 'forward');
    await oldSession('lg1:', 'old-1', { id: 'old-a', url: 'http://old-a.internal/mcp', alive: true });
    expect(await b.cluster.owners!.lookupOwner('old-1')).toEqual({
      instanceId: 'old-a',
      self: false,
      principal: undefined,
      address: 'http://old-a.internal/mcp',
    });
    expect(await b.cluster.owners!.takeOver('old-1', undefined)).toMatchObject({ owner: { instanceId: 'old-a' } });
    // Nothing moved: the old owner still serves it.
    expect(await admin.exists('lg1:{old-1}:s')).toBe(0);
  });

  it('forwarding: once its old owner is gone the session is moved over, its running call fenced and answered; the old owner record names the new owner', async () => {
    const b = await instance('b2', 'lg2:', 'forward');
    const streamId = 'old-stream'.padEnd(22, '0');
    await oldSession('lg2:', 'old-2', { id: 'old-a', url: 'http://old-a.internal/mcp', alive: false }, streamId);
    expect(await b.cluster.owners!.lookupOwner('old-2')).toBeUndefined();
    expect(await b.cluster.owners!.takeOver('old-2', undefined)).toEqual({ record, principal: undefined });
    expect(await admin.hmget('lg2:{old-2}:s', 'o', 'u')).toEqual(['b2', 'http://b2.internal/mcp']);
    // An old instance that was away reads the old owner record: it names the new owner (it forwards there, and fences itself out).
    expect(JSON.parse((await admin.get('lg2:owner:old-2'))!)).toMatchObject({ i: 'b2', u: 'http://b2.internal/mcp' });
    expect(await admin.exists('lg2:restore:old-2')).toBe(0);
    // The call that ran on the old owner: listed, fenced (its old writer's next frame is refused by Redis), answered here.
    expect(await b.eventStore.unfinished('old-2')).toEqual([{ streamId, lastSeq: 2, requestIds: [7] }]);
    await expect(admin.xadd(`lg2:{old-2}:${streamId}`, '3-0', 'f', 'stale', 'e', '0')).rejects.toThrow(/equal or smaller/);
    const lost = `id: ${streamId}.3\ndata: {"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"lost"}}\n\n`;
    await b.eventStore.append({ sessionId: 'old-2', streamId }, 3, lost, true);
    expect(await b.eventStore.replayAfter('old-2', streamId, 0)).toEqual({
      ok: true,
      lastSeq: 3,
      complete: true,
      frames: [`id: ${streamId}.1\ndata: {}\n\n`, `id: ${streamId}.2\ndata: {}\n\n`, lost],
    });
    expect(await b.cluster.owners!.lookupOwner('old-2')).toMatchObject({ instanceId: 'b2', self: true });
  });

  it('shared: a copy is made from the old record, which stays for the old instances still serving it', async () => {
    const b = await instance('b3', 'lg3:', 'shared');
    await oldSession('lg3:', 'old-3', { id: 'old-a', url: '', alive: true });
    expect(await b.cluster.copies!.restore('old-3', undefined)).toEqual({ record, principal: undefined });
    expect(await admin.hexists('lg3:{old-3}:s', 'r')).toBe(1);
    expect(await admin.exists('lg3:restore:old-3')).toBe(1);
  });
});

describe('a task an instance of 0.1 runs, polled through an upgraded one', () => {
  it('is found, and answered and cancelled in the keys its owner reads', async () => {
    const b = await instance('b4', 'lg4:', 'forward');
    // What 0.1's RedisTaskStore.create and update wrote (keys without a hash tag).
    await admin.hset(
      'lg4:task:t-old',
      'taskId',
      't-old',
      'principal',
      '',
      'status',
      'input_required',
      'createdAt',
      '1',
      'lastUpdatedAt',
      '2',
      'ttlMs',
      '60000',
      'owner',
      'old-a',
    );
    await admin.hset('lg4:task:t-old:input', 'q', JSON.stringify({ method: 'elicitation/create' }));
    expect(await b.taskStore.get('t-old')).toMatchObject({
      taskId: 't-old',
      status: 'input_required',
      owner: 'old-a',
      inputRequests: { q: { method: 'elicitation/create' } },
    });
    expect(await b.taskStore.answer('t-old', { q: { action: 'accept' } })).toBe(true);
    expect(await admin.lrange('lg4:task:t-old:answers', 0, -1)).toEqual(['q', JSON.stringify({ action: 'accept' })]);
    expect(await b.taskStore.cancel('t-old', 'no more')).toBe(true);
    expect(await admin.hget('lg4:task:t-old', 'status')).toBe('cancelled');
    expect(await b.taskStore.get('t-never')).toBeUndefined();
  });
});

describe("a live session's next request on an upgraded instance", () => {
  for (const mode of ['forward', 'shared'] as const) {
    it(`${mode === 'forward' ? 'forwarding' : 'shared'}: served (200), as before the deploy`, async () => {
      const prefix = `lg-http-${mode}:`;
      const server: Server = createServer((req, res) => void handleNodeRequest(handler, req, res));
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
      const s = createRedisScaleOut({
        url: redis.url,
        keyPrefix: prefix,
        heartbeatMs: 60_000,
        ...(mode === 'shared' ? { mode } : { internalUrl: url }),
      });
      const handler = createMcpHandler({
        server: () => createFixtureServer(),
        eventStore: s.eventStore,
        cluster: s.cluster,
        taskStore: s.taskStore,
      });
      try {
        await s.ready(5_000);
        await oldSession(prefix, 'old-http', { id: 'old-gone', url: 'http://127.0.0.1:9/mcp', alive: false });
        const res = await http(url).post({ jsonrpc: '2.0', id: 1, method: 'tools/list' }, { 'mcp-session-id': 'old-http' });
        const body = await res.text();
        expect(res.status, body).toBe(200);
        expect(body).toContain('long_task');
      } finally {
        await handler.close();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      }
    });
  }
});
