/**
 * The OAuth 2.1 resource server (`auth` option) on every way of serving a handler: the Protected
 * Resource Metadata (RFC 9728) byte for byte, every refusal the issue lists on every verb of both
 * eras (each with its status, its `WWW-Authenticate` challenge and a JSON-RPC error body, and
 * nothing served: no session, no server, no tool run), the verified identity reaching tools of
 * both SDK majors, and a step-up from `403 insufficient_scope` to a call that runs. Tokens come
 * from a real local issuer (packages/testbed/src/token-issuer.ts) whose JWKS the verifier fetches.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createMcpHandler, jwtVerifier, type AuthOptions, type McpHandler, type McpHandlerOptions } from '@mcp-kit/core';
import { fixtureServer, type FixtureSdk } from '@mcp-kit/fixtures';
import { authTargets, type Served } from '@mcp-kit/testbed/auth-targets';
import { envelope, modernRequest, routingHeaders, callTool, initializeRequest, LEGACY as PROTOCOL } from '@mcp-kit/testbed/requests';
import { modernAnswer, rawRequest, SseStream } from '@mcp-kit/testbed/fetch-client';
import { startTokenIssuer, tamper, type TokenIssuer } from '@mcp-kit/testbed/token-issuer';

let issuer: TokenIssuer;
beforeAll(async () => {
  issuer = await startTokenIssuer();
});
afterAll(async () => {
  await issuer?.close();
});

/** What a test's handler did: servers built, `whoami` runs and what it saw, errors reported. */
interface Probe {
  built: number;
  whoami: any[];
  errors: Error[];
}

/** A handler with `auth` over the fixture plus `whoami`, which returns the `authInfo` its tool saw. */
export function authHandler(
  auth: Partial<AuthOptions>,
  sdk: FixtureSdk = 'v2',
  options: Partial<McpHandlerOptions> = {},
): { handler: McpHandler; probe: Probe } {
  const probe: Probe = { built: 0, whoami: [], errors: [] };
  const handler = createMcpHandler({
    retryMs: 200,
    onError: (e) => probe.errors.push(e),
    ...options,
    server: () => {
      probe.built++;
      const server = fixtureServer(sdk) as any;
      server.registerTool('whoami', { description: 'the caller' }, (extra: any) => {
        const info = sdk === 'v1' ? extra.authInfo : extra.http?.authInfo;
        const seen = info && { clientId: info.clientId, sub: info.extra?.sub, scopes: info.scopes, resource: String(info.resource) };
        probe.whoami.push(seen);
        return { content: [{ type: 'text', text: JSON.stringify(seen ?? null) }] };
      });
      // What a server keeps between the requests it serves: here a count of them.
      let calls = 0;
      server.registerTool('count', { description: 'how many times this server was called' }, () => ({
        content: [{ type: 'text', text: String(++calls) }],
      }));
      return server;
    },
    auth: {
      authorizationServers: [issuer.issuer],
      verifier: jwtVerifier({ issuer: issuer.issuer }),
      scopes: ['mcp'],
      toolScopes: { long_task: ['mcp:long'] },
      resourceName: 'mcp-kit auth test',
      ...auth,
    },
  });
  return { handler, probe };
}

const JSON_POST = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': PROTOCOL };
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** The result of a 2025-era POST answered with SSE (or JSON): the last message. */
async function answerOf(response: Response): Promise<any> {
  return (await modernAnswer(response)).answer;
}

describe.each(authTargets)('resource server: $name', (target) => {
  let served: Served | undefined;
  let mcpUrl = '';
  let probe: Probe;
  let handler: McpHandler;
  const start = async (auth: Partial<AuthOptions> = {}, sdk: FixtureSdk = 'v2', options: Partial<McpHandlerOptions> = {}) => {
    ({ handler, probe } = authHandler(auth, sdk, options));
    served = await target.start(handler);
    mcpUrl = `${served.origin}/mcp`;
  };
  afterEach(async () => {
    await served?.close();
    served = undefined;
  });

  const metadataUrl = () => `${served!.origin}/.well-known/oauth-protected-resource/mcp`;
  const token = (options?: Parameters<TokenIssuer['jwt']>[1]) => issuer.jwt(mcpUrl, options);
  const post = (body: unknown, headers: Record<string, string> = {}, url = mcpUrl) =>
    fetch(url, { method: 'POST', headers: { ...JSON_POST, ...headers }, body: JSON.stringify(body) });
  const modern = (body: any, headers: Record<string, string> = {}) =>
    fetch(mcpUrl, { method: 'POST', headers: { ...routingHeaders(body), ...headers }, body: JSON.stringify(body) });
  /** Opens a 2025 session with `auth` headers; returns the headers its requests carry. */
  const openSession = async (auth: Record<string, string>) => {
    const response = await post(initializeRequest(1), auth);
    expect(response.status).toBe(200);
    const sessionId = response.headers.get('mcp-session-id')!;
    await answerOf(response);
    const headers = { ...auth, 'mcp-session-id': sessionId };
    expect((await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, headers)).status).toBe(202);
    return headers;
  };

  it('serves the metadata at the path-suffixed and the bare well-known URL, byte for byte, with CORS', async () => {
    await start();
    const expected =
      `{"resource":"${served!.origin}/mcp","authorization_servers":["${issuer.issuer}"],` +
      `"scopes_supported":["mcp","mcp:long"],"bearer_methods_supported":["header"],"resource_name":"mcp-kit auth test"}`;
    for (const url of [metadataUrl(), `${served!.origin}/.well-known/oauth-protected-resource`]) {
      const response = await fetch(url);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('application/json');
      expect(response.headers.get('access-control-allow-origin')).toBe('*');
      expect(await response.text()).toBe(expected);
    }
    const preflight = await fetch(metadataUrl(), { method: 'OPTIONS' });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('*');
    // Metadata needs no token, and nothing was built to serve it.
    expect(probe.built).toBe(0);
  });

  it('answers every verb of both eras without a token 401 with resource_metadata and scope, and serves nothing', async () => {
    await start();
    const challenge = `Bearer resource_metadata="${metadataUrl()}", scope="mcp"`;
    const requests: [string, () => Promise<Response>][] = [
      ['initialize', () => post(initializeRequest(7))],
      ['2026 tools/call', () => modern(modernRequest(8, 'tools/call', { name: 'whoami', arguments: {} }))],
      ['GET', () => fetch(mcpUrl, { headers: { accept: 'text/event-stream', 'mcp-session-id': 'x', 'mcp-protocol-version': PROTOCOL } })],
      ['DELETE', () => fetch(mcpUrl, { method: 'DELETE', headers: { 'mcp-session-id': 'x' } })],
      ['Basic credentials', () => post(initializeRequest(9), { authorization: 'Basic YTpi' })],
    ];
    for (const [what, send] of requests) {
      const response = await send();
      expect(response.status, what).toBe(401);
      expect(response.headers.get('www-authenticate'), what).toBe(challenge);
      const body = await response.json();
      expect(body, what).toMatchObject({
        jsonrpc: '2.0',
        error: { code: -32000, data: { error: 'unauthorized', resource_metadata: metadataUrl() } },
      });
      // The body was not read: there is no id to echo, and never `"id": null`.
      expect('id' in body, what).toBe(false);
    }
    expect(probe.built).toBe(0);
    expect(handler.sessionCount).toBe(0);
  });

  it('refuses every bad token with invalid_token on every verb of both eras, and runs nothing', async () => {
    await start();
    const session = await openSession(bearer(await token()));
    const built = probe.built;
    const resource = mcpUrl;
    const bad: [string, string, RegExp][] = [
      ['expired', await token({ claims: { exp: Math.floor(Date.now() / 1000) - 60 } }), /expired/],
      ['not yet valid', await token({ claims: { nbf: Math.floor(Date.now() / 1000) + 600 } }), /not valid yet/],
      ["another resource's audience", await issuer.jwt(`${served!.origin}/other`), /another resource/],
      ['another issuer', await token({ claims: { iss: `${issuer.issuer}/` } }), /another issuer/],
      ['alg none', issuer.unsigned(resource), /algorithm|not a valid JWT/],
      ['a tampered signature', tamper(await token()), /signature/],
      ['a key the JWKS does not have', await token({ unpublishedKey: true }), /key the issuer does not publish/],
      ['garbage', 'not-a-jwt', /not a valid JWT/],
    ];
    for (const [what, t, description] of bad) {
      const headers = { ...session, ...bearer(t) };
      const attempts: [string, () => Promise<Response>][] = [
        ['initialize', () => post(initializeRequest(3), bearer(t))],
        ['tools/call in the session', () => post(callTool(4, 'whoami'), headers)],
        ['GET', () => fetch(mcpUrl, { headers: { accept: 'text/event-stream', 'mcp-protocol-version': PROTOCOL, ...headers } })],
        ['DELETE', () => fetch(mcpUrl, { method: 'DELETE', headers: { 'mcp-protocol-version': PROTOCOL, ...headers } })],
        ['2026 tools/call', () => modern(modernRequest(5, 'tools/call', { name: 'whoami', arguments: {} }), bearer(t))],
      ];
      for (const [verb, send] of attempts) {
        const response = await send();
        const label = `${what}, ${verb}`;
        expect(response.status, label).toBe(401);
        const challenge = response.headers.get('www-authenticate') ?? '';
        expect(challenge, label).toMatch(
          /^Bearer error="invalid_token", error_description="[^"]+", scope="mcp", resource_metadata="[^"]+"$/,
        );
        expect(challenge, label).toContain(`resource_metadata="${metadataUrl()}"`);
        expect(/error_description="([^"]+)"/.exec(challenge)![1], label).toMatch(description);
        const body = await response.json();
        expect(body.error, label).toMatchObject({ code: -32000, data: { error: 'invalid_token' } });
        expect('id' in body, label).toBe(false);
      }
    }
    expect(probe.whoami).toEqual([]);
    expect(probe.built).toBe(built);
    // Not deleted by any of the refused DELETEs: the session still answers its own token.
    expect(handler.sessionCount).toBe(1);
    const answer = await answerOf(await post(callTool(6, 'whoami'), session));
    expect(answer.result.content[0].text).toContain('"clientId":"client-a"');
  });

  it('refuses a token in the query string with 400 invalid_request, with or without the header', async () => {
    await start();
    const good = await token();
    for (const headers of [{}, bearer(good)]) {
      const response = await post(initializeRequest(1), headers, `${mcpUrl}?access_token=${good}`);
      expect(response.status).toBe(400);
      expect(response.headers.get('www-authenticate')).toBe(
        `Bearer error="invalid_request", error_description="access tokens are accepted only in the Authorization header, never in the query string", scope="mcp", resource_metadata="${metadataUrl()}"`,
      );
      expect((await response.json()).error.data.error).toBe('invalid_request');
    }
    expect(handler.sessionCount).toBe(0);
  });

  it('a token without the endpoint scope gets 403 insufficient_scope; a tool scope is asked for, then the call runs with it (both eras)', async () => {
    await start();
    const noScope = await token({ claims: { scope: 'openid' } });
    const refused = await post(initializeRequest(1), bearer(noScope));
    expect(refused.status).toBe(403);
    expect(refused.headers.get('www-authenticate')).toBe(
      `Bearer error="insufficient_scope", error_description="this request needs the scope mcp", scope="mcp", resource_metadata="${metadataUrl()}"`,
    );
    expect(handler.sessionCount).toBe(0);

    // 2025 session: long_task needs mcp:long on top of mcp.
    const session = await openSession(bearer(await token()));
    const call = callTool(2, 'long_task', { steps: 1, intervalMs: 0 });
    const forbidden = await post(call, session);
    expect(forbidden.status).toBe(403);
    expect(forbidden.headers.get('www-authenticate')).toBe(
      `Bearer error="insufficient_scope", error_description="this request needs the scope mcp mcp:long", scope="mcp mcp:long", resource_metadata="${metadataUrl()}"`,
    );
    // The request's id is echoed: the body was read, and the client can match the refusal.
    expect(await forbidden.json()).toMatchObject({
      jsonrpc: '2.0',
      id: 2,
      error: { data: { error: 'insufficient_scope', scope: 'mcp mcp:long' } },
    });
    const stepped = { ...session, ...bearer(await token({ claims: { scope: 'mcp mcp:long' } })) };
    expect((await answerOf(await post(call, stepped))).result.content[0].text).toBe('completed 1 steps');

    // 2026-07-28: the same rule, per request.
    const modernCall = modernRequest(3, 'tools/call', { name: 'long_task', arguments: { steps: 1, intervalMs: 0 } });
    const forbiddenModern = await modern(modernCall, bearer(await token()));
    expect(forbiddenModern.status).toBe(403);
    expect(forbiddenModern.headers.get('www-authenticate')).toContain('scope="mcp mcp:long"');
    expect(await forbiddenModern.json()).toMatchObject({ id: 3, error: { data: { error: 'insufficient_scope' } } });
    const ran = await modernAnswer(await modern(modernCall, bearer(await token({ claims: { scope: 'mcp mcp:long' } }))));
    expect(ran.answer.result.content[0].text).toBe('completed 1 steps');
  });

  it("tasks/* of a scoped tool's task need the tool's scopes too; another principal's task stays unknown", async () => {
    await start();
    const withTasks = envelope({ 'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } } });
    const full = bearer(await token({ claims: { scope: 'mcp mcp:long' } }));
    const args = { steps: 2, intervalMs: 20, closeEvery: 1, retryMs: 50 };
    const created = await modernAnswer(
      await modern(modernRequest(1, 'tools/call', { name: 'long_task', arguments: args }, withTasks), full),
    );
    expect(created.answer.result.resultType).toBe('task');
    const get = (id: number, auth: Record<string, string>) =>
      modern(modernRequest(id, 'tasks/get', { taskId: created.answer.result.taskId }, withTasks), auth);
    // The same principal with a token of the endpoint's scope only: the task's tool needs mcp:long.
    const refused = await get(2, bearer(await token()));
    expect(refused.status).toBe(403);
    expect(refused.headers.get('www-authenticate')).toContain(
      'error="insufficient_scope", error_description="this request needs the scope mcp mcp:long"',
    );
    expect(await refused.json()).toMatchObject({ id: 2, error: { data: { error: 'insufficient_scope' } } });
    // Another principal, scopes or not: no such task.
    const foreign = await modernAnswer(await get(3, bearer(await token({ claims: { sub: 'mallory', scope: 'mcp mcp:long' } }))));
    expect(foreign.answer.error.code).toBe(-32602);
    let task: any;
    for (let id = 4; !task || task.status === 'working'; id++) {
      // Polled at the task's pollIntervalMs, as a client does.
      if (task) await new Promise((r) => setTimeout(r, task.pollIntervalMs));
      task = (await modernAnswer(await get(id, full))).answer.result;
    }
    expect(task).toMatchObject({ status: 'completed', result: { content: [{ text: 'completed 2 steps' }] } });
  });

  it('several configured names: the Host picks one by host and port, a token must be for that one, the metadata names it', async () => {
    const [a, b] = ['https://a.example.test/mcp', 'https://b.example.test:8443/mcp'];
    await start({ resource: [a, b] }, 'v2', { allowedHosts: ['a.example.test', 'b.example.test', '127.0.0.1'] });
    const send = (host: string, token: string) =>
      rawRequest(mcpUrl, { method: 'POST', headers: { host, ...JSON_POST, ...bearer(token) }, body: JSON.stringify(initializeRequest(1)) });
    const [forA, forB] = [await issuer.jwt(a), await issuer.jwt(b)];
    for (const [host, token, status] of [
      ['a.example.test', forA, 200],
      ['a.example.test:443', forA, 200],
      ['b.example.test:8443', forB, 200],
      ['a.example.test', forB, 401],
      ['b.example.test:8443', forA, 401],
      // The name without its port, another port, another name: none of them is configured.
      ['b.example.test', forB, 403],
      ['a.example.test:8443', forA, 403],
      ['127.0.0.1', forA, 403],
    ] as const) {
      const response = await send(host, token);
      expect(response.status, `${host} with a token for ${token === forA ? a : b}`).toBe(status);
    }
    const metadata = async (host: string) =>
      rawRequest(`${served!.origin}/.well-known/oauth-protected-resource/mcp`, {
        method: 'GET',
        headers: { host, 'x-forwarded-host': 'evil.example' },
      });
    expect(JSON.parse(await (await metadata('a.example.test')).text()).resource).toBe(a);
    expect(JSON.parse(await (await metadata('b.example.test:8443')).text()).resource).toBe(b);
    expect((await metadata('evil.example')).status).toBe(403);
  });

  it("a resumed 2025 stream of a scoped tool's call needs the tool's scope, as the call did", async () => {
    await start();
    const full = bearer(await token({ claims: { scope: 'mcp mcp:long' } }));
    const session = await openSession(full);
    const controller = new AbortController();
    // Two steps: one close, after the first; the result comes on the resumed stream.
    const call = callTool(2, 'long_task', { steps: 2, intervalMs: 20, closeEvery: 1, retryMs: 50 });
    const response = await post(call, { ...session, ...full });
    expect(response.status).toBe(200);
    // The tool closes the stream after its first step (SEP-1699): the client comes back from there.
    const stream = new SseStream(response, controller);
    await stream.ended_();
    const lastEventId = stream.blocks.filter((b) => b.id).at(-1)!.id!;
    const resume = (auth: Record<string, string>) =>
      fetch(mcpUrl, {
        headers: { accept: 'text/event-stream', 'mcp-protocol-version': PROTOCOL, ...session, ...auth, 'last-event-id': lastEventId },
      });
    const narrow = await resume(bearer(await token()));
    expect(narrow.status).toBe(403);
    expect(narrow.headers.get('www-authenticate')).toContain('scope="mcp mcp:long"');
    expect((await narrow.json()).error.data.error).toBe('insufficient_scope');
    const resumed = await resume(full);
    expect(resumed.status).toBe(200);
    const rest = new SseStream(resumed, new AbortController());
    const answer = (await rest.until((m: any) => m.id === 2))
      .filter((b) => b.data)
      .map((b) => JSON.parse(b.data!))
      .at(-1);
    expect(answer.result.content[0].text).toBe('completed 2 steps');
  });

  it("a 2026 server keeps nothing of one principal's requests for another's", async () => {
    await start();
    const count = async (sub: string) => {
      const body = modernRequest(1, 'tools/call', { name: 'count', arguments: {} });
      const answered = await modernAnswer(await modern(body, bearer(await token({ claims: { sub } }))));
      return answered.answer.result.content[0].text;
    };
    expect(await count('alice')).toBe('1');
    expect(await count('alice')).toBe('2');
    // Another principal with the same client and capabilities: its own server, which counted nothing of alice's.
    expect(await count('mallory')).toBe('1');
    expect(await count('alice')).toBe('3');
  });

  it("another principal's valid token cannot use a session (403), and the session's own principal keeps it", async () => {
    await start();
    const session = await openSession(bearer(await token()));
    const mallory = { ...session, ...bearer(await token({ claims: { sub: 'mallory' } })) };
    const refused = await post(callTool(2, 'whoami'), mallory);
    expect(refused.status).toBe(403);
    expect((await refused.json()).error.message).toMatch(/another principal/);
    expect(probe.whoami).toEqual([]);
    expect((await fetch(mcpUrl, { method: 'DELETE', headers: mallory })).status).toBe(403);
    expect(handler.sessionCount).toBe(1);
  });
});

describe.each(['v1', 'v2'] as const)('the verified identity reaches tools: SDK %s', (sdk) => {
  let served: Served | undefined;
  afterEach(async () => {
    await served?.close();
    served = undefined;
  });

  it('as extra.authInfo / ctx.http.authInfo, in a 2025 session and a 2026 request, over what getAuthInfo said', async () => {
    const { handler, probe } = authHandler({}, sdk);
    served = await authTargets[0]!.start(handler);
    const mcpUrl = `${served.origin}/mcp`;
    const headers = { ...JSON_POST, ...bearer(await issuer.jwt(mcpUrl, { claims: { sub: 'bob', client_id: 'client-b' } })) };
    const init = await fetch(mcpUrl, { method: 'POST', headers, body: JSON.stringify(initializeRequest(1)) });
    await answerOf(init);
    const inSession = { ...headers, 'mcp-session-id': init.headers.get('mcp-session-id')! };
    await fetch(mcpUrl, {
      method: 'POST',
      headers: inSession,
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    });
    await answerOf(await fetch(mcpUrl, { method: 'POST', headers: inSession, body: JSON.stringify(callTool(2, 'whoami')) }));
    const body = modernRequest(3, 'tools/call', { name: 'whoami', arguments: {} }, envelope());
    await modernAnswer(
      await fetch(mcpUrl, {
        method: 'POST',
        headers: { ...routingHeaders(body), authorization: headers.authorization },
        body: JSON.stringify(body),
      }),
    );
    const seen = { clientId: 'client-b', sub: 'bob', scopes: ['mcp'], resource: mcpUrl };
    expect(probe.whoami).toEqual([seen, seen]);
  });
});
