/**
 * A session's restore record is bound to the principal that created it: another principal's
 * request never restores it (403, as on the owner), whether the owner handed the session off
 * (draining) or crashed. Two Express instances in this process, each with its own Redis
 * connections to one real redis-server and an auth step that sets `req.auth` the way a bearer
 * middleware would; they reach each other over real HTTP. With MCP_KIT_CLUSTER=shared
 * they have no internalUrl and never reach each other: there are no owners, and the principal the
 * record was saved with is all that stands between a session and another principal.
 */
import { createServer, type Server } from 'node:http';
import express from 'express';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { createMcpHandler, type McpHandler } from '@mcp-kit/core';
import { mcpExpress } from '@mcp-kit/express';
import { createFixtureServer } from '@mcp-kit/fixtures';
import { createRedisClient, createRedisScaleOut, whenReady } from '@mcp-kit/redis';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';
import { freePort } from '@mcp-kit/testbed/processes';
import { CLUSTER_MODE } from '@mcp-kit/testbed/cluster';

const SHARED = CLUSTER_MODE === 'shared';
import { callTool, initializeRequest, LEGACY } from '@mcp-kit/testbed/requests';
import { http } from '@mcp-kit/testbed/fetch-client';

const HEARTBEAT_MS = 500;

/** `Authorization: Bearer <client>[/<sub>]` → what a verifying middleware would put on `req.auth`. */
function authOf(authorization: string | undefined): AuthInfo | undefined {
  const m = /^Bearer ([^/]+)(?:\/(.+))?$/.exec(authorization ?? '');
  if (!m) return undefined;
  return { token: m[0], clientId: m[1]!, scopes: ['mcp'], extra: m[2] ? { sub: m[2] } : {} };
}

interface Node {
  name: string;
  url: string;
  handler: McpHandler;
  instanceId: string;
  /** Ends the instance as a crash would: no more HTTP, no more heartbeat, nothing cleaned up in Redis. */
  crash(): Promise<void>;
  close(): Promise<void>;
}

let redis: TestRedis;
/** The test's own look into Redis. */
let store: ReturnType<typeof createRedisClient>;
let nodes: Node[] = [];

beforeAll(async () => {
  redis = await startRedis();
  store = createRedisClient(redis.url);
  await whenReady(store);
});

afterEach(async () => {
  for (const n of nodes) await n.close();
  nodes = [];
});

afterAll(async () => {
  store?.disconnect();
  await redis?.stop();
});

async function startNode(name: string): Promise<Node> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}/mcp`;
  // Its own connection, so a crash can cut it without a goodbye to Redis.
  const client = createRedisClient(redis.url);
  const scaleOut = createRedisScaleOut({ client, ...(SHARED ? { mode: 'shared' } : { internalUrl: url }), heartbeatMs: HEARTBEAT_MS });
  const handler = createMcpHandler({
    server: () => createFixtureServer(),
    retryMs: 100,
    eventStore: scaleOut.eventStore,
    cluster: scaleOut.cluster,
    taskStore: scaleOut.taskStore,
    onError: () => {},
  });
  const app = express();
  app.use(
    '/mcp',
    (req, res, next) => {
      (req as typeof req & { auth?: AuthInfo }).auth = authOf(req.headers.authorization);
      res.setHeader('x-served-by', name);
      next();
    },
    mcpExpress(handler),
  );
  const server: Server = createServer(app);
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  await scaleOut.ready();
  let crashed = false;
  const stopHttp = async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  };
  return {
    name,
    url,
    handler,
    instanceId: scaleOut.cluster.instanceId,
    async crash() {
      crashed = true;
      await stopHttp();
      client.disconnect();
    },
    async close() {
      if (!crashed) await stopHttp();
      await handler.close().catch(() => {});
      client.disconnect();
    },
  };
}

const ALICE = 'Bearer alice/u1';
const INTRUDERS = ['Bearer mallory', 'Bearer alice/u2', 'Bearer alice', undefined];

/** Alice's session on `node`, with one finished call whose stream a resume could name. */
async function aliceSession(node: Node) {
  const api = http(node.url);
  const init = await api.postSse(initializeRequest(1, LEGACY), { authorization: ALICE });
  const sessionId = init.response.headers.get('mcp-session-id')!;
  await init.until((m) => m.id === 1);
  await init.ended_();
  const headers = { 'mcp-session-id': sessionId, authorization: ALICE };
  expect((await api.post({ jsonrpc: '2.0', method: 'notifications/initialized' }, headers)).status).toBe(202);
  const call = await api.postSse(callTool(2, 'long_task', { steps: 2, intervalMs: 0 }), headers);
  await call.until((m) => m.id === 2);
  await call.ended_();
  const eventId = call.blocks.find((b) => b.id)!.id!;
  return { sessionId, eventId };
}

/** Every verb another principal could try with Alice's session id; returns status, error and body of each. */
async function intrude(url: string, sessionId: string, eventId: string, authorization: string | undefined) {
  const api = http(url);
  const headers: Record<string, string> = { 'mcp-session-id': sessionId, ...(authorization ? { authorization } : {}) };
  const attempts: Array<[string, Promise<Response>]> = [
    ['POST', api.post(callTool(3, 'test_simple_text'), headers)],
    ['GET', api.get(headers)],
    ['GET resume', api.get({ ...headers, 'last-event-id': eventId })],
    ['DELETE', api.del(headers)],
  ];
  const out: Array<{ what: string; status: number; code: number; text: string }> = [];
  for (const [what, attempt] of attempts) {
    const res = await attempt;
    const text = await res.text();
    out.push({ what, status: res.status, code: JSON.parse(text).error?.code, text });
  }
  return out;
}

/** The session's owner (its instance and URL, forwarding) and record, from its hash. */
async function keys(sessionId: string): Promise<{ owner: { i: string; u: string } | null; restore: string | null }> {
  const [owner, url, restore] = await store.hmget(`mcp-kit:{${sessionId}}:s`, 'o', 'u', 'r');
  return { owner: owner ? { i: owner, u: url! } : null, restore };
}

/** Resolves when Redis expires `key` (a keyspace notification), or at once if it is gone already. */
async function expiry(key: string): Promise<void> {
  await store.config('SET', 'notify-keyspace-events', 'Ex');
  const listener = store.duplicate();
  try {
    const expired = new Promise<void>((resolve) => listener.on('message', (_channel: string, k: string) => k === key && resolve()));
    await whenReady(listener);
    await listener.subscribe('__keyevent@0__:expired');
    if ((await store.exists(key)) === 0) return;
    await expired;
  } finally {
    listener.disconnect();
  }
}

/** What Alice's own request gets on `url`: it must restore her session there. */
async function aliceAgain(url: string, sessionId: string) {
  const res = await http(url).post({ jsonrpc: '2.0', id: 9, method: 'tools/list' }, { 'mcp-session-id': sessionId, authorization: ALICE });
  return { status: res.status, servedBy: res.headers.get('x-served-by'), text: await res.text() };
}

describe('restore records are bound to their principal', () => {
  it('a session its owner handed off (draining) is refused to every other principal on every verb, and restored for its own', async () => {
    const a = await startNode('A');
    const b = await startNode('B');
    nodes.push(a, b);
    const { sessionId, eventId } = await aliceSession(a);
    await a.handler.drain({ deadlineMs: 5_000 });
    expect(await keys(sessionId)).toMatchObject({ owner: null, restore: expect.stringContaining('"clientInfo"') });

    for (const who of INTRUDERS) {
      for (const attempt of await intrude(b.url, sessionId, eventId, who)) {
        expect({ who, what: attempt.what, status: attempt.status, code: attempt.code }).toEqual({
          who,
          what: attempt.what,
          status: 403,
          code: -32000,
        });
        expect(attempt.text).toContain('another principal');
        expect(attempt.text).not.toContain('completed 2 steps');
      }
    }
    // Nobody took it over, and its record (events included) is intact.
    expect(b.handler.sessionCount).toBe(0);
    expect((await keys(sessionId)).owner).toBeNull();
    const again = await aliceAgain(b.url, sessionId);
    expect(again).toMatchObject({ status: 200, servedBy: 'B' });
    expect(again.text).toContain('long_task');
    expect(b.handler.sessionCount).toBe(1);
    const replay = await http(b.url).getSse({ 'mcp-session-id': sessionId, authorization: ALICE, 'last-event-id': eventId });
    await replay.ended_();
    expect(replay.raw).toContain('completed 2 steps');
  });

  it('a session whose owner crashed is refused to every other principal, before and after the heartbeat expired, and restored for its own', async () => {
    const a = await startNode('A');
    const b = await startNode('B');
    nodes.push(a, b);
    const { sessionId, eventId } = await aliceSession(a);
    await a.crash();
    const heartbeat = `mcp-kit:instance:${a.instanceId}`;
    const gone = expiry(heartbeat);
    // Right away (the dead owner's heartbeat key still lives: B sees an owner of another principal) ...
    const early = await intrude(b.url, sessionId, eventId, 'Bearer mallory');
    expect(await store.exists(heartbeat)).toBe(1);
    // ... and once it expired (B would take the session over, were it Mallory's).
    await gone;
    const late = await intrude(b.url, sessionId, eventId, 'Bearer mallory');
    for (const attempt of [...early, ...late]) {
      expect({ what: attempt.what, status: attempt.status }).toEqual({ what: attempt.what, status: 403 });
      expect(attempt.text).toContain('another principal');
    }
    expect(b.handler.sessionCount).toBe(0);
    if (!SHARED) expect((await keys(sessionId)).owner).toMatchObject({ u: a.url });
    const again = await aliceAgain(b.url, sessionId);
    expect(again).toMatchObject({ status: 200, servedBy: 'B' });
    if (SHARED) expect((await keys(sessionId)).owner).toBeNull();
    else expect((await keys(sessionId)).owner).toMatchObject({ u: b.url });
  });
});
