/**
 * The resource server under attack, as an attacker at any header would try it: each built example
 * app (Express, Koa, a real `next start`) started with AUTH_ISSUER naming a real authorization
 * server (oidc-provider), which issues and signs every token here (packages/testbed/src/auth-server.ts:
 * the client credentials grant, each token shaped in one precise way before it is signed). Every
 * forgery has a control beside it that is accepted, so a refusal is the forgery's and not a broken
 * setup's. The app needs `mcp` for every request and `mcp:long` for long_task (PROTECTED_APP_ENV).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAuthServer, type AuthServer, type TokenShape } from '@mcp-kit/testbed/auth-server';
import { EXAMPLE_APPS, type ExampleAppName, type Instance } from '@mcp-kit/testbed/cluster';
import { envelope, modernRequest, routingHeaders } from '@mcp-kit/testbed/requests';
import { modernAnswer } from '@mcp-kit/testbed/fetch-client';
import { startProtectedApp } from '@mcp-kit/testbed/protected-app';
import { initializeRequest, LEGACY as PROTOCOL } from '@mcp-kit/testbed/requests';
import { rawRequest, SseStream } from '@mcp-kit/testbed/fetch-client';

let as: AuthServer;
beforeAll(async () => {
  as = await startAuthServer();
});
afterAll(async () => {
  await as?.close();
});

const INITIALIZE = JSON.stringify(initializeRequest(1));
const JSON_POST = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': PROTOCOL };
const WITH_TASKS = envelope({ 'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } } });
const descriptionOf = (response: Response) => /error_description="([^"]*)"/.exec(response.headers.get('www-authenticate') ?? '')?.[1];

describe.each(EXAMPLE_APPS)('authorization hardening: %s', (appName: ExampleAppName) => {
  let app: Instance;
  let origin = '';
  /** What the app's own URL is on another port of the same host: another MCP server's resource. */
  let neighbour = '';
  beforeAll(async () => {
    app = await startProtectedApp(appName, as);
    origin = new URL(app.url).origin;
    neighbour = `http://127.0.0.1:${app.port + 1}/mcp`;
    as.allowResource(neighbour);
    as.allowResource(`https://127.0.0.1:${app.port}/mcp`);
  }, 60_000);
  afterAll(async () => {
    await app?.stop('SIGKILL');
  });

  const token = (shape?: TokenShape, scope = 'mcp mcp:long', resource = app.url) => as.issueToken(resource, scope, shape);
  /** An initialize with these headers over a raw connection (fetch cannot set Host). */
  const initialize = (headers: Record<string, string>) =>
    rawRequest(app.url, { method: 'POST', headers: { host: `127.0.0.1:${app.port}`, ...JSON_POST, ...headers }, body: INITIALIZE });
  const bearer = (t: string) => ({ authorization: `Bearer ${t}` });

  it('a token for another resource is refused whatever the Host, X-Forwarded-* or Forwarded headers say; the metadata names the app only', async () => {
    const control = await initialize(bearer(await token()));
    expect(control.status).toBe(200);
    const foreign = await token(undefined, 'mcp mcp:long', neighbour);
    const plain = await initialize(bearer(foreign));
    expect(plain.status).toBe(401);
    expect(descriptionOf(plain)).toBe('the access token was issued for another resource (audience)');
    // The neighbour's name in Host: this is no resource for it (only the port differs).
    const hosted = await initialize({ ...bearer(foreign), host: `127.0.0.1:${app.port + 1}` });
    expect(hosted.status).toBe(403);
    expect(hosted.headers.get('mcp-session-id')).toBeNull();
    expect((await hosted.json()).error.message).toMatch(/names no resource of this server/);
    const metadata = await rawRequest(`${origin}/.well-known/oauth-protected-resource/mcp`, {
      method: 'GET',
      headers: { host: `127.0.0.1:${app.port + 1}` },
    });
    expect(metadata.status).toBe(403);
    const refusal = await metadata.json();
    expect(refusal.resource).toBeUndefined();
    expect(refusal.error.message).toMatch(/names no resource of this server/);
    // A token for the https name of the same port, with every header that names a scheme or host.
    const secure = await token(undefined, 'mcp mcp:long', `https://127.0.0.1:${app.port}/mcp`);
    const forwarding: Record<string, string>[] = [
      { 'x-forwarded-proto': 'https' },
      { 'x-forwarded-proto': 'https', 'x-forwarded-host': `127.0.0.1:${app.port}`, 'x-forwarded-port': '443' },
      { forwarded: `proto=https;host="127.0.0.1:${app.port}"` },
    ];
    for (const headers of forwarding) {
      const refused = await initialize({ ...bearer(secure), ...headers });
      expect(refused.status, JSON.stringify(headers)).toBe(401);
      expect(descriptionOf(refused)).toBe('the access token was issued for another resource (audience)');
    }
    const served = await rawRequest(`${origin}/.well-known/oauth-protected-resource/mcp`, {
      method: 'GET',
      headers: { host: `127.0.0.1:${app.port}`, 'x-forwarded-proto': 'https', 'x-forwarded-host': 'evil.example' },
    });
    expect(served.status).toBe(200);
    expect((await served.json()).resource).toBe(app.url);
  });

  it('a token without exp is refused (RFC 9068 §2.2), and one whose signature carries padding', async () => {
    const noExp = await initialize(bearer(await token({ claims: { exp: undefined } })));
    expect(noExp.status).toBe(401);
    expect(descriptionOf(noExp)).toMatch(/exp/);
    const good = await token();
    expect((await initialize(bearer(good))).status).toBe(200);
    const padded = await initialize(bearer(`${good}==`));
    expect(padded.status).toBe(401);
    expect(descriptionOf(padded)).toMatch(/not a valid JWT|malformed/);
  });

  it('tokens that name no subject are refused, so two of them never share a session', async () => {
    const anonymous = { claims: { sub: undefined, client_id: undefined, azp: undefined } };
    const [a, b] = [await token(anonymous), await token({ claims: { ...anonymous.claims, scope: 'mcp' } })];
    const opened = await initialize(bearer(a));
    expect(opened.status).toBe(401);
    expect(descriptionOf(opened)).toMatch(/no subject/);
    expect(opened.headers.get('mcp-session-id')).toBeNull();
    expect((await initialize(bearer(b))).status).toBe(401);
  });

  it("subscriptions/listen for a task of a scoped tool needs the tool's scope, as tasks/get does; with it, the result arrives", async () => {
    const full = bearer(await token());
    const call = modernRequest(
      1,
      'tools/call',
      { name: 'long_task', arguments: { steps: 20, intervalMs: 100, closeEvery: 1 } },
      WITH_TASKS,
    );
    const created = await modernAnswer(
      await fetch(app.url, { method: 'POST', headers: { ...routingHeaders(call), ...full }, body: JSON.stringify(call) }),
    );
    const taskId = created.answer.result.taskId as string;
    expect(taskId).toEqual(expect.any(String));
    const listen = (id: number, auth: Record<string, string>, controller = new AbortController()) => {
      const body = modernRequest(id, 'subscriptions/listen', { notifications: { taskIds: [taskId] } }, WITH_TASKS);
      return fetch(app.url, {
        method: 'POST',
        headers: { ...routingHeaders(body), ...auth },
        body: JSON.stringify(body),
        signal: controller.signal,
      });
    };
    const narrow = bearer(await token(undefined, 'mcp'));
    const get = modernRequest(2, 'tasks/get', { taskId }, WITH_TASKS);
    const polled = await fetch(app.url, { method: 'POST', headers: { ...routingHeaders(get), ...narrow }, body: JSON.stringify(get) });
    expect(polled.status).toBe(403);
    await polled.body?.cancel();
    const refused = await listen(3, narrow);
    expect(refused.status).toBe(403);
    expect(refused.headers.get('www-authenticate')).toContain('error="insufficient_scope"');
    expect(refused.headers.get('www-authenticate')).toContain('scope="mcp mcp:long"');
    expect(await refused.json()).toMatchObject({ id: 3, error: { data: { error: 'insufficient_scope' } } });

    const controller = new AbortController();
    const allowed = await listen(4, full, controller);
    expect(allowed.status).toBe(200);
    const stream = new SseStream(allowed, controller);
    const blocks = await stream.until((m: any) => m.method === 'notifications/tasks' && m.params.status === 'completed');
    const done = blocks
      .filter((b) => b.data)
      .map((b) => JSON.parse(b.data!))
      .at(-1);
    expect(done.params.result.content[0].text).toBe('completed 20 steps');
    controller.abort();
  });

  it('a Host whose port is no port is 400 with a JSON-RPC body, never 500, and the app keeps serving', async () => {
    const good = bearer(await token());
    for (const host of ['127.0.0.1:abc', '[::1]:x', '127.0.0.1:99999', '127.0.0.1:1:2', 'localhost:-1', '127.0.0.1:']) {
      const response = await initialize({ ...good, host });
      expect(response.status, host).toBe(400);
      expect(response.headers.get('content-type'), host).toContain('application/json');
      expect((await response.json()).error, host).toMatchObject({ code: -32000, message: expect.stringMatching(/Host/) });
    }
    expect((await initialize(good)).status).toBe(200);
  });

  it('the metadata preflight allows Authorization and MCP-Protocol-Version', async () => {
    const preflight = await fetch(`${origin}/.well-known/oauth-protected-resource/mcp`, {
      method: 'OPTIONS',
      headers: {
        origin: 'https://client.example',
        'access-control-request-method': 'GET',
        'access-control-request-headers': 'authorization, mcp-protocol-version',
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('*');
    const allowed = (preflight.headers.get('access-control-allow-headers') ?? '').toLowerCase().split(/\s*,\s*/);
    expect(allowed).toEqual(expect.arrayContaining(['authorization', 'mcp-protocol-version']));
  });
});
