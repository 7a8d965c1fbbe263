/**
 * Isolation and hostile clients, against every adapter: cursors from other sessions, guessed and
 * expired cursors replay nothing; session and event ids carry ≥ 128 random bits; a session bound
 * to a principal refuses every other one; Host/Origin allow-lists do what they say.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import Koa from 'koa';
import { afterEach, describe, expect, it } from 'vitest';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { createMcpHandler, toFetchHandler, type McpHandler } from '@mcp-kit/core';
import { mcpExpress } from '@mcp-kit/express';
import { mcpKoa } from '@mcp-kit/koa';
import { adapters, type ServerUnderTest } from '@mcp-kit/testbed/adapters';
import { serveFetch } from '@mcp-kit/testbed/fetch-runtime';
import { LEGACY, initializeRequest, callTool } from '@mcp-kit/testbed/requests';
import { jsonRpcError, RawSession, RawSse, send, splitId, type RawResponse } from '@mcp-kit/testbed/raw-client';
import { ServerCounter } from '@mcp-kit/testbed/probes';
import { Rng, seedFor } from '@mcp-kit/testbed/random';
import { parseSse } from '@mcp-kit/testbed/sse';

const JSON_POST = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': LEGACY };

/** Every event id of a finished call, and the call's text. */
async function completedCall(s: RawSession, id: number, steps = 3): Promise<{ ids: string[]; raw: string }> {
  const stream = await s.postSse(callTool(id, 'long_task', { steps, intervalMs: 0 }));
  expect(await stream.end()).toBe('server');
  return { ids: stream.blocks.filter((b) => b.id).map((b) => b.id!), raw: stream.raw };
}

function resume(s: RawSession, lastEventId: string): Promise<RawResponse> {
  return send(s.url, { method: 'GET', headers: { ...s.headers, accept: 'text/event-stream', 'last-event-id': lastEventId } });
}

function expectNoReplay(res: RawResponse, status: number, code: number, leaked: string[]): void {
  expect(res.status).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  expect(jsonRpcError(res).code).toBe(code);
  for (const secret of leaked) expect(res.text).not.toContain(secret);
}

describe.each(adapters)('replay isolation and id randomness: $name', (adapter) => {
  let sut: ServerUnderTest | undefined;
  afterEach(async () => {
    await sut?.close();
    sut = undefined;
  });

  it("a Last-Event-ID from another session, a guessed one or an expired session's replays nothing: a clear 4xx", async () => {
    const TTL = 400;
    const servers = new ServerCounter();
    sut = await adapter.start(adapter.inProcess ? { sessionIdleTtlMs: TTL, server: servers.factory() } : { sessionIdleTtlMs: TTL });
    const a = await RawSession.open(sut.url);
    // An open stream keeps A from idling out while C expires.
    const keepAlive = await a.get();
    await keepAlive.next();
    const own = await completedCall(a, 1);

    const b = await RawSession.open(sut.url);
    const bCall = await completedCall(b, 7, 4);
    const bLive = await b.postSse(callTool(8, 'long_task', { steps: 1_000, intervalMs: 50 }));
    await bLive.next();
    await bLive.next();
    const bStandalone = await b.get();
    const bCursors = [...bCall.ids, bLive.lastEventId!, (await bStandalone.next()).id!];
    const bSecrets = [b.sessionId, ...new Set(bCursors.map((c) => splitId(c).token))];

    // Every cursor B ever saw, under A's session: 404, nothing of B in the answer.
    for (const cursor of bCursors) expectNoReplay(await resume(a, cursor), 404, -32000, bSecrets);
    // Guesses: random tokens, and A's own token past the end of its stream.
    const rng = new Rng(seedFor(`guessed cursors ${adapter.name}`));
    const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    for (let i = 0; i < 50; i++) {
      const guess = `${Array.from({ length: 22 }, () => rng.pick([...ALPHABET])).join('')}.${i % 5}`;
      expectNoReplay(await resume(a, guess), 404, -32000, bSecrets);
    }
    const ownToken = splitId(own.ids[0]!).token;
    expectNoReplay(await resume(a, `${ownToken}.${own.ids.length}`), 404, -32000, bSecrets);
    // B still replays its own stream, byte for byte.
    const bReplay = await b.get(bCall.ids[0]);
    await bReplay.end();
    expect(bReplay.blocks.slice(1).map((x) => x.raw)).toEqual(
      parseSse(bCall.raw)
        .map((x) => x.raw)
        .slice(1),
    );

    // C's cursors after C expired: C's session id is gone (404 -32001); under A they are unknown.
    const c = await RawSession.open(sut.url);
    const cCall = await completedCall(c, 1);
    const cSecrets = [c.sessionId, splitId(cCall.ids[0]!).token];
    if (adapter.inProcess) {
      await servers.closedAtLeast(1);
    } else {
      // A wrong protocol version is refused after the session lookup and is not activity.
      for (const deadline = Date.now() + 15_000; ;) {
        const probe = await send(c.url, {
          method: 'GET',
          headers: { ...c.headers, accept: 'text/event-stream', 'mcp-protocol-version': '1999-01-01' },
        });
        if (probe.status === 404) break;
        if (Date.now() > deadline) throw new Error('session C did not expire');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    for (const cursor of cCall.ids) {
      expectNoReplay(await resume(c, cursor), 404, -32001, []);
      expectNoReplay(await resume(a, cursor), 404, -32000, cSecrets);
    }
    bLive.abort();
    bStandalone.abort();
    keepAlive.abort();
  });

  it('session ids and stream tokens carry at least 128 random bits', async () => {
    sut = await adapter.start();
    // 200 ids: a fixed bit (counter, timestamp, short random part) is 100 away from n/2, a fair
    // one within 35 (5 standard deviations) but once in ~2 million.
    const N = 200;
    const sessionIds: string[] = [];
    const tokens: string[] = [];
    for (let i = 0; i < N; i++) {
      const init = await RawSse.open(sut.url, { method: 'POST', headers: JSON_POST, body: JSON.stringify(initializeRequest(i)) });
      await init.end();
      const sessionId = init.headers['mcp-session-id'] as string;
      sessionIds.push(sessionId);
      tokens.push(splitId(init.blocks[0]!.id!).token);
      expect((await new RawSession(sut.url, sessionId).del()).status).toBe(200);
    }
    for (const [name, ids] of [
      ['session ids', sessionIds],
      ['stream tokens', tokens],
    ] as const) {
      expect(new Set(ids).size, name).toBe(N);
      const fair = fairBits(ids);
      console.log(
        `[ids ${adapter.name}] ${name}: ${ids[0]!.length} chars, ${fair.total} bit positions, ${fair.fair} look like fair coins over ${N} ids`,
      );
      expect(fair.fair, name).toBeGreaterThanOrEqual(128);
    }
  }, 120_000);
});

/**
 * How many bit positions of the decoded ids behave like independent fair coins: each is set in
 * about half of the ids, within 5 standard deviations. A counter, a timestamp or a short random
 * part leaves most positions fixed.
 */
function fairBits(ids: string[]): { total: number; fair: number } {
  const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const hex = ids.every((id) => /^[0-9a-f]+$/.test(id));
  const bitsPerChar = hex ? 4 : 6;
  const length = ids[0]!.length;
  const ones = new Array<number>(length * bitsPerChar).fill(0);
  for (const id of ids) {
    for (let i = 0; i < length; i++) {
      const v = hex ? parseInt(id[i]!, 16) : ALPHABET.indexOf(id[i]!);
      for (let bit = 0; bit < bitsPerChar; bit++) if ((v >> bit) & 1) ones[i * bitsPerChar + bit]!++;
    }
  }
  const n = ids.length;
  const limit = 5 * Math.sqrt(n / 4);
  return { total: ones.length, fair: ones.filter((k) => Math.abs(k - n / 2) <= limit).length };
}

// --- principals ----------------------------------------------------------------------------------

/** `Authorization: Bearer <name>[/<sub>]` → the identity an auth middleware would have verified. */
function principal(authorization: string | undefined | null): AuthInfo | undefined {
  const m = /^Bearer ([^/]+)(?:\/(.+))?$/.exec(authorization ?? '');
  if (!m) return undefined;
  return { token: m[0], clientId: m[1]!, scopes: ['mcp'], extra: m[2] ? { sub: m[2] } : {} };
}

interface AuthServer {
  name: string;
  url: string;
  close(): Promise<void>;
}

async function serve(server: Server, handler: McpHandler, name: string): Promise<AuthServer> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    name,
    url: `http://127.0.0.1:${port}/mcp`,
    async close() {
      await handler.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/**
 * Each adapter mounted behind an auth step the way its users would: Express `req.auth`, Koa
 * `ctx.state.auth`, and the web bridge's `getAuthInfo` (what `mcpNext(handler, { getAuthInfo })`
 * passes on), served over node:http with a small Request/Response shim.
 */
const authServers: Array<{ name: string; start(handler: McpHandler): Promise<AuthServer> }> = [
  {
    name: 'express',
    start(handler) {
      const app = express();
      app.use(
        '/mcp',
        (req, _res, next) => {
          (req as typeof req & { auth?: AuthInfo }).auth = principal(req.headers.authorization);
          next();
        },
        mcpExpress(handler),
      );
      return serve(createServer(app), handler, 'express');
    },
  },
  {
    name: 'koa',
    start(handler) {
      const app = new Koa();
      app.use(async (ctx, next) => {
        ctx.state.auth = principal(ctx.get('authorization'));
        await next();
      });
      app.use(mcpKoa(handler, { path: '/mcp' }));
      return serve(createServer(app.callback()), handler, 'koa');
    },
  },
  {
    name: 'web (toFetchHandler, as mcpNext uses it)',
    start(handler) {
      const fetchHandler = toFetchHandler(handler, {
        getAuthInfo: (req) => principal(req.headers.get('authorization')),
        localAddress: '127.0.0.1',
      });
      return serve(
        createServer((req, res) => void serveFetch(fetchHandler, req, res)),
        handler,
        'web',
      );
    },
  },
];

describe.each(authServers)('session hijack: $name', (target) => {
  let server: AuthServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it("a session bound to its creator's principal refuses every other principal, on every method, and leaks nothing", async () => {
    const handler = createMcpHandler({ server: new ServerCounter().factory(), retryMs: 100, onError: (e) => console.error(e) });
    server = await target.start(handler);
    const alice = await RawSession.open(server.url, { authorization: 'Bearer alice/u1' });
    const call = await completedCall(alice, 2);
    const secrets = [splitId(call.ids[0]!).token];

    const as = (authorization: string | undefined) => {
      const headers = { ...alice.headers };
      delete (headers as Record<string, string>).authorization;
      return authorization ? { ...headers, authorization } : headers;
    };
    const intruders = ['Bearer mallory', 'Bearer alice/u2', 'Bearer alice', undefined];
    for (const who of intruders) {
      const h = as(who);
      const attempts: Array<[string, Promise<RawResponse>]> = [
        [
          'POST',
          send(server.url, { method: 'POST', headers: { ...JSON_POST, ...h }, body: JSON.stringify(callTool(3, 'test_simple_text')) }),
        ],
        ['GET', send(server.url, { method: 'GET', headers: { ...h, accept: 'text/event-stream' } })],
        ['GET resume', send(server.url, { method: 'GET', headers: { ...h, accept: 'text/event-stream', 'last-event-id': call.ids[0]! } })],
        ['DELETE', send(server.url, { method: 'DELETE', headers: h })],
      ];
      for (const [what, attempt] of attempts) {
        const res = await attempt;
        expect({ who, what, status: res.status }).toEqual({ who, what, status: 403 });
        expect(jsonRpcError(res)).toMatchObject({ code: -32000, message: expect.stringMatching(/another principal/) });
        for (const s of secrets) expect(res.text).not.toContain(s);
      }
    }
    // Mallory's own session can't reach Alice's cursor either.
    const mallory = await RawSession.open(server.url, { authorization: 'Bearer mallory' });
    expectNoReplay(await resume(mallory, call.ids[0]!), 404, -32000, secrets);
    // Alice is unaffected: her session, her replay, her DELETE.
    const replay = await alice.get(call.ids[0]);
    await replay.end();
    expect(replay.messages.at(-1)!.message).toMatchObject({ id: 2, result: { content: [{ text: 'completed 3 steps' }] } });
    expect((await alice.del()).status).toBe(200);
    expect(handler.sessionCount).toBe(1);
  });
});

// --- DNS rebinding -------------------------------------------------------------------------------

describe.each(adapters)('DNS rebinding allow-lists: $name', (adapter) => {
  let sut: ServerUnderTest | undefined;
  afterEach(async () => {
    await sut?.close();
    sut = undefined;
  });

  /** An initialize with this Host (and Origin); returns the status, after closing any session it opened. */
  async function initWith(host: string, origin?: string): Promise<number> {
    const headers: Record<string, string> = { ...JSON_POST, host: host.replace('PORT', new URL(sut!.url).port) };
    if (origin) headers.origin = origin;
    const res = await RawSse.open(sut!.url, { method: 'POST', headers, body: JSON.stringify(initializeRequest()) });
    await res.end();
    if (res.status === 403)
      expect(JSON.parse(res.raw).error).toMatchObject({ code: -32000, message: expect.stringMatching(/DNS-rebinding|Host|Origin/) });
    const sessionId = res.headers['mcp-session-id'];
    if (typeof sessionId === 'string')
      await send(sut!.url, { method: 'DELETE', headers: { 'mcp-session-id': sessionId, host: '127.0.0.1' } });
    return res.status;
  }

  it('allowedHosts replaces the local defaults: listed names pass (any case, any port), others get 403', async () => {
    sut = await adapter.start({ dnsRebindingProtection: true, allowedHosts: ['mcp.example.test', '127.0.0.1'] });
    expect(await initWith('mcp.example.test:PORT')).toBe(200);
    expect(await initWith('MCP.Example.Test')).toBe(200);
    expect(await initWith('localhost:PORT')).toBe(403);
    expect(await initWith('mcp.example.test.evil.example:PORT')).toBe(403);
    expect(await initWith('evil.example')).toBe(403);
    // Origins default to the host list.
    expect(await initWith('mcp.example.test', 'https://mcp.example.test')).toBe(200);
    expect(await initWith('mcp.example.test', 'http://localhost:3000')).toBe(403);
  });

  it('allowedOrigins lists exact origins (scheme and port count); a missing Origin is fine', async () => {
    sut = await adapter.start({ dnsRebindingProtection: true, allowedOrigins: ['https://app.example.test', 'http://localhost:5173'] });
    expect(await initWith('127.0.0.1:PORT')).toBe(200);
    expect(await initWith('127.0.0.1:PORT', 'https://app.example.test')).toBe(200);
    expect(await initWith('127.0.0.1:PORT', 'https://app.example.test/')).toBe(200);
    expect(await initWith('127.0.0.1:PORT', 'http://localhost:5173')).toBe(200);
    expect(await initWith('127.0.0.1:PORT', 'http://app.example.test')).toBe(403);
    expect(await initWith('127.0.0.1:PORT', 'http://localhost:5174')).toBe(403);
    expect(await initWith('127.0.0.1:PORT', 'https://evil.example')).toBe(403);
    expect(await initWith('evil.example', 'https://app.example.test')).toBe(403);
  });

  it('dnsRebindingProtection: false accepts any Host and Origin, even on a loopback bind', async () => {
    sut = await adapter.start({ dnsRebindingProtection: false });
    expect(await initWith('evil.example')).toBe(200);
    expect(await initWith('evil.example', 'http://evil.example')).toBe(200);
  });
});
