/**
 * A seeded fuzz of the headers an attacker controls, against the resource server on Express, Koa
 * and Next's route handlers, with real tokens from a real authorization server (oidc-provider):
 * `Authorization` (real tokens for this server and for others, mangled ones, other schemes,
 * garbage, two of them), `Host` (this listener's loopback names, another port, other names,
 * ports that are no ports), and `X-Forwarded-Proto`, `-Host`, `-Port` and `Forwarded` with
 * whatever they may say. Every answer must be 200, 400, 401 or 403 with a JSON-RPC error body for
 * a refusal, never a 5xx; a session opens only for an unmangled token issued for this listener
 * under the name the Host gave; the metadata never names another resource; and the process keeps
 * serving. The handler has no `auth.resource`: the loopback default, the one made of the most of
 * what arrives with the request.
 *
 * The default run is a sample (well under a minute); `LONG=1` runs more. Each run prints its seed;
 * `SEED=<n>` replays it, and any one case can be replayed alone (`caseRng`).
 */
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMcpHandler, jwtVerifier, type McpHandler } from '@mcp-kit/core';
import { createFixtureServer } from '@mcp-kit/fixtures';
import { startAuthServer, type AuthServer } from '@mcp-kit/testbed/auth-server';
import { authTargets, type Served } from '@mcp-kit/testbed/auth-targets';
import { caseRng, count, LONG, seedFor, type Rng } from '@mcp-kit/testbed/random';
import { initializeRequest, LEGACY as PROTOCOL } from '@mcp-kit/testbed/requests';

const RUNS = count(800, 20_000, 'AUTH_FUZZ_RUNS');

let as: AuthServer;
beforeAll(async () => {
  as = await startAuthServer();
});
afterAll(async () => {
  await as?.close();
});

/** A token of the pool, and whether a session may open with it (and under which Host names). */
interface PoolToken {
  label: string;
  token: string;
  /** The loopback name it was issued for at this listener's port; `undefined`: another resource. */
  ownName?: string;
}

interface Answer {
  status: number;
  contentType: string | undefined;
  body: string;
  sessionId: string | undefined;
}

/** One request over a raw connection: any Host, repeated headers, any bytes node lets through. */
function send(port: number, method: string, path: string, headers: [string, string][], body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, setHost: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode!,
          contentType: res.headers['content-type'],
          body: Buffer.concat(chunks).toString('utf8'),
          sessionId: res.headers['mcp-session-id'] as string | undefined,
        }),
      );
      res.on('error', reject);
    });
    req.on('error', reject);
    for (const [name, value] of headers) req.appendHeader(name, value);
    req.end(body);
  });
}

const printable = (rng: Rng, max = 24) => Array.from({ length: rng.int(1, max) }, () => String.fromCharCode(rng.int(0x21, 0x7e))).join('');

/** A token spelled another way, or signed for another key, or cut: each must be refused. */
function mangle(rng: Rng, token: string): string {
  const [h, p, s] = token.split('.') as [string, string, string];
  return rng.pick([
    () => `${token}==`,
    () => `${token}=`,
    () => `${h}.${p}.${s.slice(0, -1)}${s.at(-1) === 'A' ? 'B' : 'A'}`,
    () => `${h}.${p}`,
    () => `${h}.${p}.${s}.${s}`,
    () => `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'at+jwt' })).toString('base64url')}.${p}.`,
    () => `${Buffer.from(JSON.stringify({ alg: 'RS256', kid: printable(rng, 12) })).toString('base64url')}.${p}.${s}`,
    () => `${Buffer.from(JSON.stringify({ alg: 'HS256', typ: 'JWT' })).toString('base64url')}.${p}.${s}`,
    () => `${h}.${Buffer.from(JSON.stringify({ aud: 'x', exp: 9_999_999_999 })).toString('base64url')}.${s}`,
    () => token.slice(0, rng.int(1, token.length - 1)),
    () => `${token}${printable(rng, 4).replace(/[^A-Za-z0-9_-]/g, 'x')}`,
  ])();
}

interface Case {
  method: 'POST' | 'GET';
  path: string;
  headers: [string, string][];
  /** The pool token sent unmangled, if one was. */
  sent: PoolToken | undefined;
  /** The Host's name when it is one of this listener's loopback names at its port. */
  ownHostName: string | undefined;
}

function caseOf(rng: Rng, port: number, pool: PoolToken[]): Case {
  const headers: [string, string][] = [];
  const ownNames = ['127.0.0.1', 'localhost', '[::1]'];
  const name = rng.pick(ownNames);
  const host = rng.weighted<[string, string | undefined]>([
    [6, [`${name}:${port}`, name]],
    [1, [`${name.toUpperCase()}:${port}`, name]],
    [1, [name, undefined]],
    [1, [`${name}:${port + 1}`, undefined]],
    [1, [rng.pick(['evil.example', `evil.example:${port}`, `127.0.0.1.nip.io:${port}`, `localhost.evil.example:${port}`]), undefined]],
    [
      1,
      [rng.pick([`${name}:abc`, '[::1]:x', `${name}:99999`, `${name}:1:2`, `${name}:-1`, `${name}:`, `${name}:0`, '[::1', '']), undefined],
    ],
    [1, [`x~${printable(rng)}`, undefined]],
  ]);
  headers.push(['host', host[0]]);
  let sent: PoolToken | undefined;
  const token = rng.pick(pool);
  rng.weighted<() => void>([
    [1, () => {}],
    [
      6,
      () => {
        sent = token;
        headers.push(['authorization', `Bearer ${token.token}`]);
      },
    ],
    [3, () => headers.push(['authorization', `Bearer ${mangle(rng, token.token)}`])],
    // The scheme is case-insensitive (RFC 9110 §11.1) and spaces around the token do not count: still this token.
    [
      1,
      () => {
        sent = token;
        headers.push(['authorization', `${rng.pick(['bearer', 'BEARER', 'Bearer '])} ${token.token} `]);
      },
    ],
    [
      1,
      () =>
        headers.push([
          'authorization',
          rng.pick(['Bearer', 'Bearer ', `Basic ${printable(rng)}`, `Bearer ${token.token} ${token.token}`, printable(rng, 60)]),
        ]),
    ],
    // Two of them: node:http keeps the first (RFC 9110 §5.3 allows no list here).
    [
      1,
      () => {
        sent = token;
        headers.push(['authorization', `Bearer ${token.token}`]);
        headers.push(['authorization', `Bearer ${rng.pick(pool).token}`]);
      },
    ],
  ])();
  // The headers proxies add, with whatever an attacker makes them say.
  const elsewhere = rng.pick(['evil.example', `127.0.0.1:${port + 1}`, `${name}:${port}`, 'api.example.com', printable(rng)]);
  if (rng.chance(0.4)) headers.push(['x-forwarded-proto', rng.pick(['https', 'http', 'wss', printable(rng)])]);
  if (rng.chance(0.4)) headers.push(['x-forwarded-host', elsewhere]);
  if (rng.chance(0.2)) headers.push(['x-forwarded-port', rng.pick(['443', String(port + 1), printable(rng)])]);
  if (rng.chance(0.3))
    headers.push(['forwarded', rng.pick([`proto=https;host="${elsewhere}"`, `for=1.2.3.4;host=${elsewhere}`, printable(rng)])]);
  if (rng.chance(0.15)) {
    return {
      method: 'GET',
      path: rng.pick(['/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-protected-resource']),
      headers,
      sent,
      ownHostName: host[1],
    };
  }
  headers.push(['content-type', 'application/json'], ['accept', 'application/json, text/event-stream'], ['mcp-protocol-version', PROTOCOL]);
  return { method: 'POST', path: '/mcp', headers, sent, ownHostName: host[1] };
}

describe.each(authTargets.filter((t) => ['express', 'koa', 'next routes'].includes(t.name)))('auth fuzz: $name', (target) => {
  let served: Served | undefined;
  let handler: McpHandler;
  const errors: Error[] = [];
  afterAll(async () => {
    await served?.close();
  });

  it(
    `${RUNS} requests with attacker-chosen Authorization, Host, X-Forwarded-* and Forwarded: only 200/400/401/403, a session only for this listener's own token`,
    async () => {
      handler = createMcpHandler({
        server: () => createFixtureServer(),
        onError: (e) => errors.push(e),
        auth: { authorizationServers: [as.issuer], verifier: jwtVerifier({ issuer: as.issuer }), scopes: ['mcp'] },
      });
      served = await target.start(handler);
      const port = Number(new URL(served.origin).port);
      const pool: PoolToken[] = [];
      for (const [label, resource, ownName] of [
        ['own', `http://127.0.0.1:${port}/mcp`, '127.0.0.1'],
        ['own localhost', `http://localhost:${port}/mcp`, 'localhost'],
        ['own [::1]', `http://[::1]:${port}/mcp`, '[::1]'],
        ['neighbour port', `http://127.0.0.1:${port + 1}/mcp`, undefined],
        ['https name', `https://127.0.0.1:${port}/mcp`, undefined],
        ['another host', 'http://evil.example/mcp', undefined],
        ['no port', 'http://127.0.0.1/mcp', undefined],
      ] as const) {
        as.allowResource(resource);
        pool.push({ label, token: await as.issueToken(resource, 'mcp'), ownName });
      }
      const seed = seedFor(`auth fuzz ${target.name}`);
      const seen = new Map<number, number>();
      const started = performance.now();
      for (let i = 0; i < RUNS; i++) {
        const c = caseOf(caseRng(seed, i), port, pool);
        const body = c.method === 'POST' ? JSON.stringify(initializeRequest(i)) : undefined;
        const answer = await send(port, c.method, c.path, c.headers, body);
        const where = `case ${i} (SEED=${seed}): ${c.method} ${c.path} ${JSON.stringify(c.headers)} → ${answer.status} ${answer.body.slice(0, 200)}`;
        seen.set(answer.status, (seen.get(answer.status) ?? 0) + 1);
        expect([200, 400, 401, 403], where).toContain(answer.status);
        if (answer.status !== 200) {
          expect(answer.contentType, where).toContain('application/json');
          expect(JSON.parse(answer.body), where).toMatchObject({
            jsonrpc: '2.0',
            error: { code: expect.any(Number), message: expect.any(String) },
          });
          expect(answer.sessionId, where).toBeUndefined();
          continue;
        }
        if (c.method === 'GET') {
          // The metadata names this listener under the Host's loopback name, nothing else.
          expect(c.ownHostName, where).toBeDefined();
          expect(JSON.parse(answer.body).resource, where).toBe(`http://${c.ownHostName}:${port}/mcp`);
          continue;
        }
        // A session: only for a token of this listener, under the name the Host gave it.
        expect(c.sent?.ownName, where).toBeDefined();
        expect(c.sent!.ownName, where).toBe(c.ownHostName);
        expect(answer.sessionId, where).toEqual(expect.any(String));
      }
      console.log(
        `[auth fuzz ${target.name}] ${RUNS} cases in ${Math.round(performance.now() - started)} ms: ${[...seen].map(([s, n]) => `${s}×${n}`).join(', ')}`,
      );
      // Still serving: the control is accepted.
      const control = await send(
        port,
        'POST',
        '/mcp',
        [
          ['host', `127.0.0.1:${port}`],
          ['authorization', `Bearer ${pool[0]!.token}`],
          ['content-type', 'application/json'],
          ['accept', 'application/json, text/event-stream'],
        ],
        JSON.stringify(initializeRequest(0)),
      );
      expect(control.status).toBe(200);
      // Nothing a request did was the server's failure.
      expect(errors).toEqual([]);
    },
    LONG ? 3_600_000 : 120_000,
  );
});
