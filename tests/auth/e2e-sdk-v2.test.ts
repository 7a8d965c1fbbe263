/**
 * The SDK v2 client (`@modelcontextprotocol/client` 2.4.0) running its own OAuth flow against the
 * built example apps (Express, Koa, `next start`) started with AUTH_ISSUER, and a real authorization server
 * (oidc-provider): as a 2025-11-25 session, from the first `401` to a polling `long_task` whose
 * `403 insufficient_scope` it steps up on (SEP-2350: the union of the scopes it had and the ones
 * challenged); and as a 2026-07-28 client (pinned, then `auto`) whose per-request POSTs each carry
 * the token, its step-up included. The app requires `mcp` for every request and `mcp:long` for
 * long_task (packages/testbed/src/protected-app.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client';
import { Browser, startAuthServer, type AuthServer } from '@mcp-kit/testbed/auth-server';
import { EXAMPLE_APPS, type ExampleAppName, type Instance } from '@mcp-kit/testbed/cluster';
import { TestOAuthClient, Wire } from '@mcp-kit/testbed/oauth-client';
import { startProtectedApp } from '@mcp-kit/testbed/protected-app';
import { completed, POLLED_CLOSES, POLLED_TASK, oneTo, stepOf } from '@mcp-kit/testbed/long-task';
import { LEGACY, MODERN } from '@mcp-kit/testbed/requests';

const STREAMED = { steps: 5, intervalMs: 10 };

type Mode = 'legacy' | 'auto' | { pin: string };

let as: AuthServer;
/** The app the tests of the describe block that runs now talk to. */
let app: Instance;
beforeAll(async () => {
  as = await startAuthServer();
});
afterAll(async () => {
  await as?.close();
});

/** Starts `appName` with AUTH_ISSUER for the describe block it is called in, and stops it after. */
function protectedApp(appName: ExampleAppName): void {
  beforeAll(async () => {
    app = await startProtectedApp(appName, as);
  });
  afterAll(async () => {
    await app?.stop('SIGKILL');
  });
}

function client(mode: Mode, steps: number[] = []): Client {
  const c = new Client({ name: 'e2e-v2', version: '1.0.0' }, { versionNegotiation: { mode } });
  c.setNotificationHandler('notifications/message', (n) => {
    const step = stepOf(n.params.data);
    if (step !== undefined) steps.push(step);
  });
  return c;
}

function transport(oauth: TestOAuthClient, wire: Wire): StreamableHTTPClientTransport {
  return new StreamableHTTPClientTransport(new URL(app.url), { authProvider: oauth, fetch: wire.fetch });
}

/** What an app does after UnauthorizedError: the user authorizes, the callback's parameters (code, iss) go to finishAuth. */
async function authorize(oauth: TestOAuthClient, t: StreamableHTTPClientTransport): Promise<void> {
  await t.finishAuth((await oauth.callbackUrl()).searchParams);
}

describe.each(EXAMPLE_APPS)('SDK v2 client, OAuth on %s', (appName) => {
  protectedApp(appName);
  it('2025-11-25 session: first 401, authorization, a polling long_task after a step-up to mcp:long', async () => {
    const wire = new Wire();
    const oauth = new TestOAuthClient(new Browser());
    const first = transport(oauth, wire);
    await expect(client('legacy').connect(first)).rejects.toBeInstanceOf(UnauthorizedError);
    expect(wire.to(app.url)[0]).toMatchObject({ rpc: 'initialize', status: 401, token: undefined });
    // The 401's scope, and (the authorization server lists it) offline_access for a refresh token.
    expect(oauth.authorizationUrls[0]!.searchParams.get('scope')).toBe('mcp offline_access');
    expect(oauth.authorizationUrls[0]!.searchParams.getAll('resource')).toEqual([app.url]);
    await authorize(oauth, first);

    const steps: number[] = [];
    const c = client('legacy', steps);
    const t = transport(oauth, wire);
    await c.connect(t);
    expect(c.getNegotiatedProtocolVersion()).toBe(LEGACY);
    const sessionId = t.sessionId;

    await expect(c.callTool({ name: 'long_task', arguments: POLLED_TASK })).rejects.toBeInstanceOf(UnauthorizedError);
    expect(wire.posted(app.url, 'tools/call long_task').map((r) => r.status)).toEqual([403]);
    // SEP-2350: what it asked for before, what it holds and what the 403 named, together.
    expect(new Set(oauth.authorizationUrls[1]!.searchParams.get('scope')!.split(' '))).toEqual(
      new Set(['mcp', 'offline_access', 'mcp:long']),
    );
    await authorize(oauth, t);
    expect(as.tokens.at(-1)).toMatchObject({ aud: app.url, sub: 'alice' });
    expect(as.tokens.at(-1)!.scope.split(' ')).toEqual(expect.arrayContaining(['mcp', 'mcp:long']));

    const result = await c.callTool({ name: 'long_task', arguments: POLLED_TASK }, { timeout: 20_000 });
    expect(result.content).toEqual(completed(POLLED_TASK.steps));
    expect(steps).toEqual(oneTo(POLLED_TASK.steps));
    expect(t.sessionId).toBe(sessionId);
    const token = oauth.tokens()!.access_token;
    const resumes = wire.resumes(app.url);
    // One resume per close; on a slow machine a close may find the client away and two merge into one.
    expect(resumes.length).toBeGreaterThanOrEqual(1);
    expect(resumes.length).toBeLessThanOrEqual(POLLED_CLOSES);
    for (const resume of resumes) expect(resume).toMatchObject({ status: 200, token, sessionId });
    await c.close();
  });
});

describe('SDK v2 client, OAuth on express-example, a 2026-07-28 client', () => {
  protectedApp('express-example');
  it('2026-07-28 (pinned, then auto): every per-request POST carries the token, the step-up included', async () => {
    const wire = new Wire();
    const oauth = new TestOAuthClient(new Browser());
    const first = transport(oauth, wire);
    await expect(client({ pin: MODERN }).connect(first)).rejects.toBeInstanceOf(UnauthorizedError);
    expect(wire.to(app.url)[0]).toMatchObject({ rpc: 'server/discover', status: 401, token: undefined });
    await authorize(oauth, first);

    const steps: number[] = [];
    const pinned = client({ pin: MODERN }, steps);
    const t = transport(oauth, wire);
    await pinned.connect(t);
    expect(pinned.getNegotiatedProtocolVersion()).toBe(MODERN);
    expect(t.sessionId).toBeUndefined();
    const simple = await pinned.callTool({ name: 'test_simple_text', arguments: {} });
    expect(simple.isError).toBeFalsy();

    await expect(pinned.callTool({ name: 'long_task', arguments: STREAMED })).rejects.toBeInstanceOf(UnauthorizedError);
    await authorize(oauth, t);
    const result = await pinned.callTool(
      { name: 'long_task', arguments: STREAMED, _meta: { 'io.modelcontextprotocol/logLevel': 'info' } },
      { timeout: 20_000 },
    );
    expect(result.content).toEqual(completed(STREAMED.steps));
    expect(steps).toEqual(oneTo(STREAMED.steps));
    expect(wire.posted(app.url, 'tools/call long_task').map((r) => r.status)).toEqual([403, 200]);

    // auto probes server/discover with the token it holds: no 401, no new authorization.
    const authorizations = oauth.authorizationUrls.length;
    const auto = client('auto');
    await auto.connect(transport(oauth, wire));
    expect(auto.getNegotiatedProtocolVersion()).toBe(MODERN);
    const again = await auto.callTool({ name: 'long_task', arguments: { steps: 2, intervalMs: 0 } });
    expect(again.content).toEqual(completed(2));
    expect(oauth.authorizationUrls).toHaveLength(authorizations);

    const requests = wire.to(app.url);
    for (const r of requests.slice(1)) {
      expect(r.method, 'a 2026 client only POSTs').toBe('POST');
      expect(r.token, r.rpc).toBeDefined();
      expect(r.sessionId).toBeUndefined();
    }
    await pinned.close();
    await auto.close();
  });
});

describe('SDK v2 client, OAuth on express-example, access tokens that live 2 s', () => {
  let shortAs: AuthServer;
  let shortApp: Instance;
  beforeAll(async () => {
    shortAs = await startAuthServer({ accessTokenTtlSeconds: 2 });
    shortApp = await startProtectedApp('express-example', shortAs);
  });
  afterAll(async () => {
    await shortApp?.stop('SIGKILL');
    await shortAs?.close();
  });

  it('an expired token is refused 401 invalid_token mid-session; the client refreshes it (offline_access) without the user and the session goes on', async () => {
    const wire = new Wire();
    const oauth = new TestOAuthClient(new Browser());
    const url = new URL(shortApp.url);
    const first = new StreamableHTTPClientTransport(url, { authProvider: oauth, fetch: wire.fetch });
    await expect(client('legacy').connect(first)).rejects.toBeInstanceOf(UnauthorizedError);
    await first.finishAuth((await oauth.callbackUrl()).searchParams);
    // The v2 client asked for offline_access (the server lists it) with prompt=consent: a refresh token came with the access token.
    expect(oauth.tokens()?.refresh_token).toBeTruthy();

    const c = client('legacy');
    const t = new StreamableHTTPClientTransport(url, { authProvider: oauth, fetch: wire.fetch });
    await c.connect(t);
    const sessionId = t.sessionId;
    // On a slow machine the token may already have expired during connect (and been refreshed): take the one held now.
    const held = oauth.tokens()!.access_token;
    const exp = (JSON.parse(Buffer.from(held.split('.')[1]!, 'base64url').toString()) as { exp: number }).exp;
    // The resource server refuses a token from its exp on: time itself is what this waits for.
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, exp * 1000 - Date.now()) + 200));

    const result = await c.callTool({ name: 'test_simple_text', arguments: {} });
    expect(result.isError).toBeFalsy();
    const calls = wire.posted(shortApp.url, 'tools/call test_simple_text');
    expect(calls.map((r) => r.status)).toEqual([401, 200]);
    expect(calls[0]!.token).toBe(held);
    expect(calls[0]!.wwwAuthenticate).toContain('error="invalid_token"');
    expect(calls[1]!.token).not.toBe(held);
    expect(calls[1]!.sessionId).toBe(sessionId);
    // No second authorization: refresh grants at the token endpoint (one per expiry met), for the same resource.
    expect(oauth.authorizationUrls).toHaveLength(1);
    const refreshes = shortAs.requests.filter((r) => r.endpoint === 'token' && r.grantType === 'refresh_token');
    expect(refreshes.length).toBeGreaterThanOrEqual(1);
    for (const r of refreshes) expect(r.status).toBe(200);
    expect(shortAs.tokens).toHaveLength(1 + refreshes.length);
    for (const token of shortAs.tokens) expect(token).toMatchObject({ aud: shortApp.url, sub: 'alice' });
    // Every refusal the client met was an expiry, and each was followed by a refresh, never by the user.
    const refused = wire.to(shortApp.url).filter((r) => r.status === 401 && r.token !== undefined);
    expect(refused.length).toBe(refreshes.length);
    await c.close();
  });
});
