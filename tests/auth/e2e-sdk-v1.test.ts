/**
 * The SDK v1 client (`@modelcontextprotocol/sdk` 1.32.2) running its own OAuth flow against each
 * built example app (Express, Koa, `next start`) started with AUTH_ISSUER, and a real
 * authorization server (oidc-provider, packages/testbed/src/auth-server.ts): from the first `401` —
 * discovery, dynamic registration, PKCE, the authorization redirect the test follows as the user's
 * browser, `finishAuth` — to a polling `long_task` whose `403 insufficient_scope` makes the client
 * authorize again for `mcp:long` and whose resume GETs carry the token. The apps require `mcp` for
 * every request and `mcp:long` for long_task (AUTH_SCOPES, AUTH_TOOL_SCOPES).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { Browser, startAuthServer, type AuthServer } from '@mcp-kit/testbed/auth-server';
import { EXAMPLE_APPS, type Instance } from '@mcp-kit/testbed/cluster';
import { startProtectedApp } from '@mcp-kit/testbed/protected-app';
import { TestOAuthClient, Wire } from '@mcp-kit/testbed/oauth-client';
import { completed, POLLED_CLOSES, POLLED_TASK, oneTo, stepOf } from '@mcp-kit/testbed/long-task';

describe.each(EXAMPLE_APPS)('SDK v1 client, OAuth on %s', (appName) => {
  let as: AuthServer;
  let app: Instance;
  beforeAll(async () => {
    as = await startAuthServer();
    app = await startProtectedApp(appName, as);
  });
  afterAll(async () => {
    await app?.stop('SIGKILL');
    await as?.close();
  });

  it('from the first 401 to a completed polling long_task, stepping up to mcp:long on its 403', async () => {
    const wire = new Wire();
    const oauth = new TestOAuthClient(new Browser());
    const url = new URL(app.url);
    const origin = url.origin;

    // 1. No token: initialize is refused, the SDK discovers the authorization server, registers,
    //    and sends the user to it; the app (this test) gets UnauthorizedError.
    const first = new StreamableHTTPClientTransport(url, { authProvider: oauth, fetch: wire.fetch });
    await expect(new Client({ name: 'e2e', version: '1.0.0' }).connect(first)).rejects.toBeInstanceOf(UnauthorizedError);
    const [refused] = wire.to(app.url);
    expect(refused).toMatchObject({ method: 'POST', rpc: 'initialize', status: 401, token: undefined });
    expect(refused!.wwwAuthenticate).toBe(`Bearer resource_metadata="${origin}/.well-known/oauth-protected-resource/mcp", scope="mcp"`);
    const metadata = wire.requests.find((r) => r.url === `${origin}/.well-known/oauth-protected-resource/mcp`);
    expect(metadata?.status).toBe(200);
    expect(as.registrations).toBe(1);
    // RFC 8707: the resource is the endpoint itself, sent to the authorization endpoint with the 401's scope.
    expect(oauth.authorizationUrls).toHaveLength(1);
    expect(oauth.authorizationUrls[0]!.searchParams.getAll('resource')).toEqual([app.url]);
    expect(oauth.authorizationUrls[0]!.searchParams.get('scope')).toBe('mcp');
    expect(oauth.authorizationUrls[0]!.searchParams.get('code_challenge_method')).toBe('S256');

    // 2. The browser comes back with a code; the SDK redeems it (with the PKCE verifier and the resource).
    await first.finishAuth(await oauth.authorizationCode());
    expect(as.tokens).toHaveLength(1);
    expect(as.tokens[0]).toMatchObject({ aud: app.url, scope: 'mcp', sub: 'alice' });

    // 3. Connected with the token: a session, and a call that needs only `mcp`.
    const transport = new StreamableHTTPClientTransport(url, { authProvider: oauth, fetch: wire.fetch });
    const client = new Client({ name: 'e2e', version: '1.0.0' });
    const steps: number[] = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      const step = stepOf(n.params.data);
      if (step !== undefined) steps.push(step);
    });
    await client.connect(transport);
    const sessionId = transport.sessionId;
    expect(sessionId).toBeTruthy();
    const simple = await client.callTool({ name: 'test_simple_text', arguments: {} });
    expect(simple.isError).toBeFalsy();

    // 4. long_task needs `mcp:long`: 403 naming every scope the call needs; the SDK authorizes again for them.
    await expect(client.callTool({ name: 'long_task', arguments: POLLED_TASK })).rejects.toBeInstanceOf(UnauthorizedError);
    const [forbidden] = wire.posted(app.url, 'tools/call long_task');
    expect(forbidden!.status).toBe(403);
    expect(forbidden!.wwwAuthenticate).toContain('error="insufficient_scope"');
    expect(forbidden!.wwwAuthenticate).toContain('scope="mcp mcp:long"');
    expect(steps).toEqual([]); // the tool did not run
    expect(oauth.authorizationUrls).toHaveLength(2);
    expect(oauth.authorizationUrls[1]!.searchParams.get('scope')).toBe('mcp mcp:long');
    expect(as.registrations).toBe(1); // the same client, registered once
    await transport.finishAuth(await oauth.authorizationCode());
    expect(as.tokens[1]).toMatchObject({ aud: app.url, scope: 'mcp mcp:long', sub: 'alice' });

    // 5. The call again, on the same session: the server closes its stream twice and the client
    //    polls by reconnecting, each GET with the new token.
    const result = await client.callTool({ name: 'long_task', arguments: POLLED_TASK }, undefined, { timeout: 20_000 });
    expect(result.content).toEqual(completed(POLLED_TASK.steps));
    expect(steps).toEqual(oneTo(POLLED_TASK.steps));
    expect(transport.sessionId).toBe(sessionId);
    const stepUpToken = oauth.tokens()!.access_token;
    const resumes = wire.resumes(app.url);
    // One resume per close; on a slow machine a close may find the client away and two merge into one.
    expect(resumes.length).toBeGreaterThanOrEqual(1);
    expect(resumes.length).toBeLessThanOrEqual(POLLED_CLOSES);
    for (const resume of resumes) expect(resume).toMatchObject({ status: 200, token: stepUpToken, sessionId });
    const calls = wire.posted(app.url, 'tools/call long_task');
    expect(calls.map((c) => c.status)).toEqual([403, 200]);
    expect(calls[1]!.token).toBe(stepUpToken);
    // Every request to the endpoint after the first carried a token from this server.
    for (const r of wire.to(app.url).slice(1)) expect(r.token, `${r.method} ${r.rpc ?? ''}`).toBeDefined();

    await client.close();
  });
});

describe('SDK v1 client, OAuth on express-example, an authorization server that caps a client at its registered scope', () => {
  let as: AuthServer;
  let app: Instance;
  beforeAll(async () => {
    as = await startAuthServer({ registeredScopeIsCeiling: true });
    app = await startProtectedApp('express-example', as);
  });
  afterAll(async () => {
    await app?.stop('SIGKILL');
    await as?.close();
  });

  // What a deployment meets with oidc-provider's (or Keycloak's) defaults: the SDK registers with
  // the 401's scope (SEP-835), the server holds it to that, and the step-up cannot be granted.
  it('the step-up to mcp:long comes back invalid_scope: the client registered for mcp only', async () => {
    const oauth = new TestOAuthClient(new Browser());
    const url = new URL(app.url);
    const first = new StreamableHTTPClientTransport(url, { authProvider: oauth });
    await expect(new Client({ name: 'e2e', version: '1.0.0' }).connect(first)).rejects.toBeInstanceOf(UnauthorizedError);
    await first.finishAuth(await oauth.authorizationCode());
    const transport = new StreamableHTTPClientTransport(url, { authProvider: oauth });
    const client = new Client({ name: 'e2e', version: '1.0.0' });
    await client.connect(transport);
    await expect(client.callTool({ name: 'long_task', arguments: POLLED_TASK })).rejects.toBeInstanceOf(UnauthorizedError);
    expect(oauth.authorizationUrls[1]!.searchParams.get('scope')).toBe('mcp mcp:long');
    await expect(oauth.callbackUrl()).rejects.toThrow(/invalid_scope/);
    expect(as.tokens.map((t) => t.scope)).toEqual(['mcp']);
    await client.close();
  });
});
