/**
 * The token verifiers against a real local issuer (packages/testbed/src/token-issuer.ts): `jwtVerifier`
 * finds the JWKS from the issuer's RFC 8414 metadata, fetches it once, fetches it again for a key
 * it does not know (a rotation) but not for every such token; `introspectionVerifier` asks the
 * RFC 7662 endpoint with its client credentials, refuses inactive tokens and other audiences, and
 * reuses an answer briefly. A verifier that fails (not the token) answers 503; a handler's `auth`
 * is checked when it is created.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import express from 'express';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  createMcpHandler,
  introspectionVerifier,
  InvalidTokenError,
  jwtVerifier,
  type AuthOptions,
  type McpHandler,
  type McpHandlerOptions,
  type TokenVerifier,
} from '@mcp-kit/core';
import { mcpExpress, type McpExpressOptions } from '@mcp-kit/express';
import { createFixtureServer } from '@mcp-kit/fixtures';
import { modernAnswer, rawRequest } from '@mcp-kit/testbed/fetch-client';
import { initializeRequest, LEGACY as PROTOCOL } from '@mcp-kit/testbed/requests';
import { startTokenIssuer, type TokenIssuer } from '@mcp-kit/testbed/token-issuer';

let issuer: TokenIssuer;
beforeAll(async () => {
  issuer = await startTokenIssuer();
});
afterAll(async () => {
  await issuer?.close();
});

let running: { handler: McpHandler; close(): Promise<void> } | undefined;
afterEach(async () => {
  await running?.close();
  running = undefined;
});

/** An Express app whose `getAuthInfo` claims to be `claimed`, serving a handler with `auth`. */
async function serve(auth: Partial<AuthOptions>, errors: Error[] = [], options: Partial<McpHandlerOptions> = {}): Promise<string> {
  const handler = createMcpHandler({
    server: () => createFixtureServer(),
    onError: (e) => errors.push(e),
    ...options,
    auth: { authorizationServers: [issuer.issuer], verifier: jwtVerifier({ issuer: issuer.issuer }), ...auth },
  });
  return listen(handler);
}

/** Serves `handler` from an Express app on a free port until the test ends; its MCP URL. */
async function listen(handler: McpHandler, options: McpExpressOptions = {}): Promise<string> {
  const app = express();
  app.use('/mcp', mcpExpress(handler, options));
  const server = createServer(app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  running = {
    handler,
    async close() {
      await handler.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
}

const initialize = (url: string, token: string) =>
  fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': PROTOCOL,
      authorization: `Bearer ${token}`,
    },
    body: JSON.stringify(initializeRequest(1)),
  });

const descriptionOf = (response: Response) => /error_description="([^"]*)"/.exec(response.headers.get('www-authenticate') ?? '')?.[1];

describe('jwtVerifier', () => {
  it('reads the metadata and the JWKS once for many requests, and not again for each token of an unknown key', async () => {
    const url = await serve({});
    const before = { ...issuer.hits };
    const fetched = (path: string) => (issuer.hits[path] ?? 0) - (before[path] ?? 0);
    for (let i = 0; i < 5; i++) {
      const response = await initialize(url, await issuer.jwt(url));
      expect(response.status).toBe(200);
      await modernAnswer(response);
    }
    expect(fetched('/.well-known/oauth-authorization-server')).toBe(1);
    expect(fetched('/jwks')).toBe(1);

    // A key the issuer does not publish: refused; the JWKS is not fetched for each such token (30 s cooldown).
    for (let i = 0; i < 3; i++) {
      const refused = await initialize(url, await issuer.jwt(url, { unpublishedKey: true }));
      expect(refused.status).toBe(401);
      expect(descriptionOf(refused)).toBe('the access token is signed with a key the issuer does not publish');
    }
    expect(fetched('/jwks')).toBe(1);
  });

  it('a key published after the JWKS was read (a rotation) is accepted once the cooldown is over, with one fetch more', async () => {
    const cooldownMs = 300;
    const url = await serve({
      verifier: jwtVerifier({ issuer: issuer.issuer, jwksUri: `${issuer.issuer}/jwks`, jwksCooldownMs: cooldownMs }),
    });
    const before = issuer.hits['/jwks'] ?? 0;
    await modernAnswer(await initialize(url, await issuer.jwt(url)));
    // The cooldown is the verifier's clock, not an event: the test holds that clock (Date only;
    // timers and I/O run as they do), so "within the cooldown" cannot pass by on a slow machine.
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() });
    try {
      await issuer.rotate();
      const token = await issuer.jwt(url);
      // Within the cooldown the JWKS is not fetched again: the new key is unknown yet.
      const early = await initialize(url, token);
      expect(early.status).toBe(401);
      expect((issuer.hits['/jwks'] ?? 0) - before).toBe(1);
      vi.setSystemTime(Date.now() + cooldownMs + 1);
      const rotated = await initialize(url, token);
      expect(rotated.status).toBe(200);
      await modernAnswer(rotated);
    } finally {
      vi.useRealTimers();
    }
    expect((issuer.hits['/jwks'] ?? 0) - before).toBe(2);
  });

  it('compares the issuer exactly: a trailing slash is another issuer, refused at discovery (503) and in tokens (401)', async () => {
    const errors: Error[] = [];
    const url = await serve({ verifier: jwtVerifier({ issuer: `${issuer.issuer}/` }) }, errors);
    const response = await initialize(url, await issuer.jwt(url, { claims: { iss: `${issuer.issuer}/` } }));
    // The metadata names the issuer without the slash: not this verifier's authorization server.
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toBe('1');
    expect(errors.map((e) => e.message).join('\n')).toMatch(/names the issuer .* not /);
  });

  it('reuses a verification only until the token expires, and only for the resource it was checked for', async () => {
    const url = await serve({ verifier: jwtVerifier({ issuer: issuer.issuer, clockToleranceSec: 0 }) });
    const token = await issuer.jwt(url);
    expect((await initialize(url, token)).status).toBe(200);
    // The same token at another name of this server is another resource: its audience does not match.
    const elsewhere = await initialize(url.replace('127.0.0.1', 'localhost'), token);
    expect(elsewhere.status).toBe(401);
    expect(descriptionOf(elsewhere)).toBe('the access token was issued for another resource (audience)');
    // At least 2 s ahead: `floor(now) + 1` left as little as a few ms, and a fresh clone's run under
    // load signed and sent the token after it had expired (401 where the test wants 200).
    const exp = Math.ceil(Date.now() / 1000) + 2;
    const short = await issuer.jwt(url, { claims: { exp } });
    expect((await initialize(url, short)).status).toBe(200);
    // Past `exp`, the cached verification is not used: the token is checked again, and refused.
    const deadline = exp * 1000 + 50;
    while (Date.now() < deadline) await new Promise((r) => setTimeout(r, deadline - Date.now()));
    const later = await initialize(url, short);
    expect(later.status).toBe(401);
    expect(descriptionOf(later)).toBe('the access token expired');
  });

  it('requiredScopes: a token without them gets 403 insufficient_scope naming them', async () => {
    const url = await serve({ verifier: jwtVerifier({ issuer: issuer.issuer, requiredScopes: ['mcp:admin'] }) });
    const response = await initialize(url, await issuer.jwt(url));
    expect(response.status).toBe(403);
    expect(response.headers.get('www-authenticate')).toMatch(/^Bearer error="insufficient_scope", .*scope="mcp:admin"/);
  });

  it('refuses options that would accept anything: alg none, no issuer', () => {
    expect(() => jwtVerifier({ issuer: issuer.issuer, algorithms: ['ES256', 'none'] })).toThrow(/never "none"/);
    expect(() => jwtVerifier({ issuer: 'not a url' })).toThrow(/issuer must be a URL/);
  });
});

describe('jwtVerifier: what an access token must be', () => {
  const now = () => Math.floor(Date.now() / 1000);

  it('has one spelling: padding, or unused bits set in a part, is refused though the bytes are the same', async () => {
    const url = await serve({ verifier: jwtVerifier({ issuer: issuer.issuer, cacheMs: 0 }) });
    const good = await issuer.jwt(url);
    const [header, payload, signature] = good.split('.') as [string, string, string];
    // ES256: 64 bytes of signature are 86 characters, whose last one carries 4 unused bits.
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const lastBitsSet = `${signature.slice(0, -1)}${alphabet[alphabet.indexOf(signature.at(-1)!) | 0x0f]}`;
    expect(Buffer.from(lastBitsSet, 'base64url')).toEqual(Buffer.from(signature, 'base64url'));
    expect((await initialize(url, good)).status).toBe(200);
    for (const spelling of [`${good}==`, `${header}.${payload}.${lastBitsSet}`, `${header}==.${payload}.${signature}`, `${good}.`]) {
      const refused = await initialize(url, spelling);
      expect(refused.status, spelling.slice(-12)).toBe(401);
      // Padding inside the token is no token68 (RFC 6750 §2.1) at all: malformed before it is a JWT.
      expect(descriptionOf(refused)).toMatch(/^the access token (is not a valid JWT|is malformed)$/);
    }
  });

  it('needs exp (RFC 9068 §2.2); iat and nbf may be ahead by the clock tolerance only', async () => {
    const url = await serve({ verifier: jwtVerifier({ issuer: issuer.issuer, clockToleranceSec: 5 }) });
    const noExp = await initialize(url, await issuer.jwt(url, { claims: { exp: undefined } }));
    expect(noExp.status).toBe(401);
    expect(descriptionOf(noExp)).toBe('the access token has no expiry (exp)');
    const future = await initialize(url, await issuer.jwt(url, { claims: { iat: now() + 60 } }));
    expect(future.status).toBe(401);
    expect(descriptionOf(future)).toBe('the access token is not valid yet (issued in the future)');
    const ahead = await initialize(url, await issuer.jwt(url, { claims: { iat: now() + 2, nbf: now() + 2 } }));
    expect(ahead.status).toBe(200);
  });

  it("typ: at+jwt, JWT or none by default (most providers' tokens), any other type refused; 'at+jwt' takes RFC 9068 tokens only", async () => {
    const lenient = await serve({ verifier: jwtVerifier({ issuer: issuer.issuer }) });
    const typed = (typ: string | undefined) => issuer.jwt(lenient, { header: { typ } });
    for (const typ of ['at+jwt', 'application/at+jwt', 'JWT', 'jwt', undefined]) {
      expect((await initialize(lenient, await typed(typ))).status, String(typ)).toBe(200);
    }
    for (const typ of ['id_token+jwt', 'logout+jwt', 'dpop+jwt', 'JOSE']) {
      const refused = await initialize(lenient, await typed(typ));
      expect(refused.status, typ).toBe(401);
      expect(descriptionOf(refused)).toBe('the access token is not typed as an access token (typ)');
    }
    await running!.close();
    const strict = await serve({ verifier: jwtVerifier({ issuer: issuer.issuer, typ: 'at+jwt' }) });
    for (const [typ, status] of [
      ['at+jwt', 200],
      ['application/at+jwt', 200],
      ['JWT', 401],
      [undefined, 401],
    ] as const) {
      expect((await initialize(strict, await issuer.jwt(strict, { header: { typ } }))).status, String(typ)).toBe(status);
    }
    expect(() => jwtVerifier({ issuer: issuer.issuer, typ: 'JWT' as 'at+jwt' })).toThrow(/typ must be 'at\+jwt'/);
  });

  it("names someone: sub, or a client (client_id, azp, Okta's cid, Entra ID v1's appid); a token naming neither is refused", async () => {
    const url = await serve({ verifier: jwtVerifier({ issuer: issuer.issuer }) });
    const nobody = { sub: undefined, client_id: undefined };
    const refused = await initialize(url, await issuer.jwt(url, { claims: nobody }));
    expect(refused.status).toBe(401);
    expect(descriptionOf(refused)).toBe('the access token names no subject (sub) and no client (client_id)');
    expect((await initialize(url, await issuer.jwt(url, { claims: { ...nobody, sub: '' } }))).status).toBe(401);
    for (const claims of [{ sub: 'alice' }, { client_id: 'c' }, { azp: 'c' }, { cid: 'c' }, { appid: 'c' }]) {
      const accepted = await initialize(url, await issuer.jwt(url, { claims: { ...nobody, ...claims } }));
      expect(accepted.status, JSON.stringify(claims)).toBe(200);
      await modernAnswer(accepted);
    }
  });
});

describe('introspectionVerifier', () => {
  const now = () => Math.floor(Date.now() / 1000);
  const verifier = (options: Partial<Parameters<typeof introspectionVerifier>[0]> = {}) =>
    introspectionVerifier({ issuer: issuer.issuer, ...issuer.introspectionClient, ...options });

  it('accepts an active token for this resource and reuses the answer; refuses inactive, expired and foreign ones', async () => {
    const url = await serve({ verifier: verifier() });
    const good = issuer.opaque({ active: true, aud: url, scope: 'mcp', client_id: 'client-o', sub: 'olga', exp: now() + 600 });
    const before = issuer.hits['/introspect'] ?? 0;
    for (let i = 0; i < 3; i++) {
      const response = await initialize(url, good);
      expect(response.status).toBe(200);
      await modernAnswer(response);
    }
    expect((issuer.hits['/introspect'] ?? 0) - before).toBe(1);

    const refusals: [string, string][] = [
      [issuer.opaque({ active: false }), 'the access token is not active (expired, revoked or unknown)'],
      [
        issuer.opaque({ active: true, aud: 'http://elsewhere.test/mcp', exp: now() + 600 }),
        'the access token was issued for another resource (audience)',
      ],
      [issuer.opaque({ active: true, aud: url, exp: now() - 5 }), 'the access token expired'],
      [issuer.opaque({ active: true, exp: now() + 600 }), 'the access token was issued for another resource (audience)'],
      ['never-issued', 'the access token is not active (expired, revoked or unknown)'],
    ];
    for (const [token, description] of refusals) {
      const response = await initialize(url, token);
      expect(response.status).toBe(401);
      expect(descriptionOf(response)).toBe(description);
    }
  });

  it('never reuses an answer past the token expiry', async () => {
    const url = await serve({ verifier: verifier({ cacheMs: 60_000 }) });
    // Expires within the second: the answer may not be reused after that.
    const exp = now() + 1;
    const token = issuer.opaque({ active: true, aud: url, scope: 'mcp', client_id: 'c', exp });
    expect((await initialize(url, token)).status).toBe(200);
    while (Date.now() < exp * 1000) await new Promise((r) => setTimeout(r, exp * 1000 - Date.now()));
    const later = await initialize(url, token);
    expect(later.status).toBe(401);
    expect(descriptionOf(later)).toBe('the access token expired');
  });

  it('an authorization server that refuses the credentials makes a 503, reported, not a 401', async () => {
    const errors: Error[] = [];
    const url = await serve({ verifier: verifier({ clientSecret: 'wrong' }) }, errors);
    const response = await initialize(url, issuer.opaque({ active: true, aud: url }));
    expect(response.status).toBe(503);
    expect(errors.at(-1)?.message).toMatch(/introspection .* answered 401/);
  });
});

describe('the auth option', () => {
  it('the verified identity wins over what getAuthInfo says; a custom verifier gets the resource', async () => {
    const seen: { token: string; resource: string }[] = [];
    const custom: TokenVerifier = async (token, ctx) => {
      seen.push({ token, resource: ctx.resource });
      if (token !== 'letmein') throw new InvalidTokenError('unknown token');
      return { token, clientId: 'custom', scopes: [], extra: { sub: 'carol' } };
    };
    const handler = createMcpHandler({
      server: () => createFixtureServer(),
      auth: { authorizationServers: [issuer.issuer], verifier: custom },
    });
    // An auth middleware that says someone else made the request.
    const url = await listen(handler, { getAuthInfo: () => ({ token: 'x', clientId: 'mallory', scopes: [] }) });
    const refused = await initialize(url, 'nope');
    expect(refused.status).toBe(401);
    expect(descriptionOf(refused)).toBe('unknown token');
    const accepted = await initialize(`${url}?x=1`, 'letmein');
    expect(accepted.status).toBe(200);
    await modernAnswer(accepted);
    expect(seen).toEqual([
      { token: 'nope', resource: url },
      // The resource has no query.
      { token: 'letmein', resource: url },
    ]);
  });

  it('without auth.resource, a Host that is no loopback name of the listening port is refused 403: a token for its resource cannot be replayed here', async () => {
    // The Host check of DNS-rebinding protection is off, as on a public address: this rule stands alone.
    const errors: Error[] = [];
    const verified: string[] = [];
    const jwt = jwtVerifier({ issuer: issuer.issuer });
    const counting: TokenVerifier = (token, ctx) => {
      verified.push(ctx.resource);
      return jwt(token, ctx);
    };
    const send = (url: string, host: string, token: string) =>
      rawRequest(url, {
        method: 'POST',
        headers: {
          host,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': PROTOCOL,
          authorization: `Bearer ${token}`,
        },
        body: JSON.stringify(initializeRequest(1)),
      });
    // A token a victim gave to evil.example's MCP server, which replays it here under its own name.
    const stolen = await issuer.jwt('http://evil.example/mcp');
    let url = await serve({ verifier: counting }, errors, { dnsRebindingProtection: false });
    const port = Number(new URL(url).port);
    const neighbour = await issuer.jwt(`http://127.0.0.1:${port + 1}/mcp`);
    for (const [host, token] of [
      ['evil.example', stolen],
      [`127.0.0.1:${port + 1}`, neighbour],
    ] as const) {
      const refused = await send(url, host, token);
      expect(refused.status, host).toBe(403);
      expect((await refused.json()).error.message).toMatch(/names no resource of this server/);
    }
    const metadata = await rawRequest(`${new URL(url).origin}/.well-known/oauth-protected-resource/mcp`, {
      method: 'GET',
      headers: { host: 'evil.example' },
    });
    expect(metadata.status).not.toBe(200);
    // Refused before any token was looked at, and nothing to report: a Host is the client's to get wrong.
    expect(verified).toEqual([]);
    expect(errors).toEqual([]);
    // The listening address's own name is the resource: the control.
    expect((await send(url, `127.0.0.1:${port}`, await issuer.jwt(url))).status).toBe(200);

    // With auth.resource set, the Host says nothing: the stolen token's audience is not the resource.
    await running!.close();
    url = await serve({ verifier: counting, resource: 'http://api.example.test/mcp' }, [], { dnsRebindingProtection: false });
    const foreign = await send(url, 'evil.example', stolen);
    expect(foreign.status).toBe(401);
    expect(descriptionOf(foreign)).toBe('the access token was issued for another resource (audience)');
  });

  it('a verifier that throws something other than InvalidTokenError answers 503 and is reported', async () => {
    const errors: Error[] = [];
    const url = await serve({ verifier: async () => Promise.reject(new Error('database down')) }, errors);
    const response = await initialize(url, 'anything');
    expect(response.status).toBe(503);
    expect((await response.json()).error.message).toMatch(/could not be checked now/);
    expect(errors.map((e) => e.message)).toEqual(['auth.verifier failed: database down']);
  });

  it('is checked when the handler is created', () => {
    const make = (auth: unknown) => () => createMcpHandler({ server: () => createFixtureServer(), auth: auth as AuthOptions });
    const verifier = async () => ({ token: '', clientId: '', scopes: [] });
    expect(make({ verifier })).toThrow(/authorizationServers/);
    expect(make({ authorizationServers: [issuer.issuer] })).toThrow(/verifier/);
    expect(make({ authorizationServers: [issuer.issuer], verifier, scopes: ['a b'] })).toThrow(/scopes/);
    expect(make({ authorizationServers: [issuer.issuer], verifier, resource: 'https://x.test/mcp#frag' })).toThrow(/resource/);
    expect(make({ authorizationServers: [issuer.issuer], verifier, resource: [] })).toThrow(/resource/);
    // Two names a Host header cannot tell apart (it carries no scheme).
    expect(make({ authorizationServers: [issuer.issuer], verifier, resource: ['http://x.test/mcp', 'https://x.test/mcp'] })).toThrow(
      /cannot tell apart/,
    );
  });

  it('without auth.resource, a handler meant for other names than loopback ones is refused when it is created', () => {
    const auth = { authorizationServers: [issuer.issuer], verifier: jwtVerifier({ issuer: issuer.issuer }) };
    const make = (options: Partial<McpHandlerOptions>) => () => createMcpHandler({ server: () => createFixtureServer(), auth, ...options });
    expect(make({ allowedHosts: ['localhost', 'mcp.example.com'] })).toThrow(
      /auth\.resource must be set \(allowedHosts names mcp\.example\.com\)/,
    );
    expect(make({ allowedHosts: ['localhost', '127.0.0.2'] })).not.toThrow();
    expect(make({ allowedHosts: ['mcp.example.com'], auth: { ...auth, resource: 'https://mcp.example.com/mcp' } })).not.toThrow();
  });
});
