/**
 * A failing authorization server is not amplified: a flood of requests against the resource server
 * costs the authorization server a bounded number of requests, healthy or failing. Counted at the
 * server itself: the local issuer (packages/testbed/src/token-issuer.ts), which can fail its JWKS, its
 * metadata or its introspection endpoint on demand, and the real one (oidc-provider, its JWKS
 * failing) behind the handler served by Express, Koa and Next's route handlers.
 */
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createMcpHandler, introspectionVerifier, jwtVerifier, type McpHandler, type TokenVerifier } from '@mcp-kit/core';
import { mcpExpress } from '@mcp-kit/express';
import { createFixtureServer } from '@mcp-kit/fixtures';
import { startAuthServer, type AuthServer } from '@mcp-kit/testbed/auth-server';
import { authTargets, type Served } from '@mcp-kit/testbed/auth-targets';
import { initializeRequest, LEGACY as PROTOCOL } from '@mcp-kit/testbed/requests';
import { startTokenIssuer, type TokenIssuer } from '@mcp-kit/testbed/token-issuer';

let issuer: TokenIssuer;
beforeAll(async () => {
  issuer = await startTokenIssuer();
});
afterAll(async () => {
  await issuer?.close();
});

let running: { close(): Promise<void> } | undefined;
afterEach(async () => {
  await running?.close();
  running = undefined;
});

/** Serves a handler with `verifier` from Express until the test ends; its MCP URL. */
async function serve(verifier: TokenVerifier, errors: Error[] = []): Promise<string> {
  const handler = createMcpHandler({
    server: () => createFixtureServer(),
    onError: (e) => errors.push(e),
    auth: { authorizationServers: [issuer.issuer], verifier },
  });
  const app = express();
  app.use('/mcp', mcpExpress(handler));
  const server = createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  running = {
    async close() {
      await handler.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
}

const initialize = async (url: string, token: string): Promise<number> => {
  const response = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': PROTOCOL,
      authorization: `Bearer ${token}`,
    },
    body: JSON.stringify(initializeRequest(1)),
  });
  await response.body?.cancel();
  return response.status;
};

/** `n` requests at once, each with its own token from `token(i)`: their statuses. */
const flood = async (url: string, n: number, token: (i: number) => Promise<string> | string): Promise<number[]> => {
  const tokens = await Promise.all(Array.from({ length: n }, (_, i) => token(i)));
  return Promise.all(tokens.map((t) => initialize(url, t)));
};

/** How many requests `path` of the local issuer answered since `before` was taken. */
const since = (before: Record<string, number>, path: string) => (issuer.hits[path] ?? 0) - (before[path] ?? 0);

/** The backoff after a first failure is a time, not an event: wait it out. */
const backoffPassed = () => new Promise((r) => setTimeout(r, 1_100));

describe('jwtVerifier against a failing JWKS or metadata endpoint', () => {
  afterEach(() => {
    issuer.fail('/jwks', undefined);
    issuer.fail('/.well-known/oauth-authorization-server', undefined);
  });

  it('a cold verifier: 50 requests while the JWKS answers 500 cost it one request, then it is asked again after the backoff', async () => {
    issuer.fail('/jwks', 500);
    const errors: Error[] = [];
    const url = await serve(jwtVerifier({ issuer: issuer.issuer }), errors);
    const before = { ...issuer.hits };
    const statuses = await flood(url, 50, () => issuer.jwt(url));
    expect(new Set(statuses)).toEqual(new Set([503]));
    expect(since(before, '/jwks')).toBe(1);
    // Reported once (when it failed), not once per request turned away meanwhile.
    expect(errors.map((e) => e.message)).toEqual([expect.stringMatching(/answered 500/)]);
    issuer.fail('/jwks', undefined);
    expect(await initialize(url, await issuer.jwt(url))).toBe(503);
    expect(since(before, '/jwks')).toBe(1);
    await backoffPassed();
    expect(await initialize(url, await issuer.jwt(url))).toBe(200);
    expect(since(before, '/jwks')).toBe(2);
  });

  it('a warm verifier: tokens with made-up key ids while the JWKS fails cost it one request per backoff; the keys it has keep serving', async () => {
    const cooldownMs = 50;
    const url = await serve(jwtVerifier({ issuer: issuer.issuer, cacheMs: 0, jwksCooldownMs: cooldownMs }));
    const good = await issuer.jwt(url);
    expect(await initialize(url, good)).toBe(200);
    issuer.fail('/jwks', 500);
    await new Promise((r) => setTimeout(r, cooldownMs + 20));
    const before = { ...issuer.hits };
    const madeUp = () => issuer.jwt(url, { unpublishedKey: true, header: { kid: randomBytes(8).toString('hex') } });
    const statuses = await flood(url, 50, madeUp);
    // Not the token's fault while the keys cannot be fetched: come back later.
    expect(new Set(statuses)).toEqual(new Set([503]));
    expect(since(before, '/jwks')).toBe(1);
    expect(await initialize(url, good)).toBe(200);
    expect(since(before, '/jwks')).toBe(1);
  });

  it('a healthy JWKS: a flood of made-up key ids costs one request per cooldown, and each is refused 401', async () => {
    const url = await serve(jwtVerifier({ issuer: issuer.issuer }));
    expect(await initialize(url, await issuer.jwt(url))).toBe(200);
    const before = { ...issuer.hits };
    const statuses = await flood(url, 50, () => issuer.jwt(url, { unpublishedKey: true, header: { kid: randomBytes(8).toString('hex') } }));
    expect(new Set(statuses)).toEqual(new Set([401]));
    expect(since(before, '/jwks')).toBeLessThanOrEqual(1);
  });

  it('a failing metadata endpoint: 50 requests cost it one discovery', async () => {
    issuer.fail('/.well-known/oauth-authorization-server', 500);
    const url = await serve(jwtVerifier({ issuer: issuer.issuer }));
    const before = { ...issuer.hits };
    const statuses = await flood(url, 50, () => issuer.jwt(url));
    expect(new Set(statuses)).toEqual(new Set([503]));
    expect(since(before, '/.well-known/oauth-authorization-server')).toBe(1);
  });
});

describe('introspectionVerifier against a flood of opaque tokens', () => {
  afterEach(() => issuer.fail('/introspect', undefined));
  const verifier = (options: Partial<Parameters<typeof introspectionVerifier>[0]> = {}) =>
    introspectionVerifier({ endpoint: `${issuer.issuer}/introspect`, ...issuer.introspectionClient, ...options });
  const made = () => randomBytes(24).toString('base64url');

  it('one introspection for concurrent requests with one token, and one for a dead token sent again', async () => {
    const url = await serve(verifier());
    const good = issuer.opaque({
      active: true,
      aud: url,
      scope: 'mcp',
      client_id: 'c',
      sub: 'olga',
      exp: Math.floor(Date.now() / 1000) + 600,
    });
    let before = { ...issuer.hits };
    expect(new Set(await flood(url, 20, () => good))).toEqual(new Set([200]));
    expect(since(before, '/introspect')).toBe(1);
    const dead = made();
    before = { ...issuer.hits };
    for (let i = 0; i < 5; i++) expect(await initialize(url, dead)).toBe(401);
    expect(since(before, '/introspect')).toBe(1);
  });

  it('made-up tokens cost the server maxPerSecond introspections a second, healthy or failing; a failure stops them for the backoff', async () => {
    const url = await serve(verifier({ maxPerSecond: 5 }));
    let before = { ...issuer.hits };
    let started = Date.now();
    let statuses = await flood(url, 50, made);
    // The budget holds a second's worth and refills as time passes: this many at most.
    const allowed = (since: number) => 5 + Math.ceil(((Date.now() - since) / 1000) * 5);
    expect(since(before, '/introspect')).toBeLessThanOrEqual(allowed(started));
    expect(statuses.filter((s) => s === 401).length).toBe(since(before, '/introspect'));
    expect(statuses.filter((s) => s === 503).length).toBe(50 - since(before, '/introspect'));

    await backoffPassed();
    issuer.fail('/introspect', 500);
    before = { ...issuer.hits };
    started = Date.now();
    statuses = await flood(url, 50, made);
    expect(new Set(statuses)).toEqual(new Set([503]));
    const failed = since(before, '/introspect');
    expect(failed).toBeGreaterThanOrEqual(1);
    expect(failed).toBeLessThanOrEqual(allowed(started));
    // Failed: none more until the backoff has passed, however many come.
    statuses = await flood(url, 50, made);
    expect(new Set(statuses)).toEqual(new Set([503]));
    expect(since(before, '/introspect')).toBe(failed);
  });
});

describe.each(authTargets.filter((t) => ['express', 'koa', 'next routes'].includes(t.name)))(
  'a failing JWKS of a real authorization server (oidc-provider): $name',
  (target) => {
    let as: AuthServer;
    let served: Served | undefined;
    beforeAll(async () => {
      as = await startAuthServer();
    });
    afterAll(async () => {
      await served?.close();
      await as?.close();
    });

    it('50 requests of a cold handler while the JWKS answers 500 cost it one request', async () => {
      as.failJwks(500);
      const handler: McpHandler = createMcpHandler({
        server: () => createFixtureServer(),
        onError: () => {},
        auth: { authorizationServers: [as.issuer], verifier: jwtVerifier({ issuer: as.issuer }), scopes: ['mcp'] },
      });
      served = await target.start(handler);
      const url = `${served.origin}/mcp`;
      as.allowResource(url);
      const token = await as.issueToken(url, 'mcp');
      const before = as.requests.filter((r) => r.endpoint === 'jwks').length;
      const statuses = await flood(url, 50, () => token);
      expect(new Set(statuses)).toEqual(new Set([503]));
      expect(as.requests.filter((r) => r.endpoint === 'jwks').length - before).toBe(1);
      as.failJwks(200);
      await backoffPassed();
      expect(await initialize(url, token)).toBe(200);
    });
  },
);
