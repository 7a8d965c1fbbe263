/**
 * The resource server through a real `next start` of apps/next-example (built by `pnpm build`),
 * made a resource server by its settings (AUTH_ISSUER, AUTH_SCOPES, AUTH_TOOL_SCOPES) with tokens
 * of a local issuer: the metadata byte for byte at both well-known URLs, and every refusal on every
 * verb of both eras, as tests/auth/resource-server.test.ts checks them in process (where the
 * handler can also be asked what it built and ran).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nextAdapter, type ServerUnderTest } from '@mcp-kit/testbed/adapters';
import { modernAnswer } from '@mcp-kit/testbed/fetch-client';
import { modernRequest, routingHeaders, callTool, initializeRequest, LEGACY as PROTOCOL } from '@mcp-kit/testbed/requests';
import { startTokenIssuer, tamper, type TokenIssuer } from '@mcp-kit/testbed/token-issuer';

let issuer: TokenIssuer;
let sut: ServerUnderTest;
let mcpUrl = '';
let origin = '';

beforeAll(async () => {
  issuer = await startTokenIssuer();
  // The app reads its settings from its environment, which it inherits from this process.
  const settings = { AUTH_ISSUER: issuer.issuer, AUTH_SCOPES: 'mcp', AUTH_TOOL_SCOPES: 'long_task=mcp:long' };
  Object.assign(process.env, settings);
  try {
    sut = await nextAdapter.start();
  } finally {
    for (const name of Object.keys(settings)) delete process.env[name];
  }
  mcpUrl = sut.url;
  origin = new URL(mcpUrl).origin;
}, 60_000);

afterAll(async () => {
  await sut?.close();
  await issuer?.close();
});

const JSON_POST = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': PROTOCOL };
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const post = (body: unknown, headers: Record<string, string> = {}, url = mcpUrl) =>
  fetch(url, { method: 'POST', headers: { ...JSON_POST, ...headers }, body: JSON.stringify(body) });
const modern = (body: any, headers: Record<string, string> = {}) =>
  fetch(mcpUrl, { method: 'POST', headers: { ...routingHeaders(body), ...headers }, body: JSON.stringify(body) });
const metadataUrl = () => `${origin}/.well-known/oauth-protected-resource/mcp`;
const token = (options?: Parameters<TokenIssuer['jwt']>[1]) => issuer.jwt(mcpUrl, options);

async function openSession(auth: Record<string, string>): Promise<Record<string, string>> {
  const response = await post(initializeRequest(1), auth);
  expect(response.status).toBe(200);
  const headers = { ...auth, 'mcp-session-id': response.headers.get('mcp-session-id')! };
  await modernAnswer(response);
  expect((await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, headers)).status).toBe(202);
  return headers;
}

describe('resource server: next start (apps/next-example with AUTH_ISSUER)', () => {
  it('serves the metadata at the path-suffixed and the bare well-known URL, byte for byte', async () => {
    const expected =
      `{"resource":"${mcpUrl}","authorization_servers":["${issuer.issuer}"],` +
      `"scopes_supported":["mcp","mcp:long"],"bearer_methods_supported":["header"]}`;
    for (const url of [metadataUrl(), `${origin}/.well-known/oauth-protected-resource`]) {
      const response = await fetch(url);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('application/json');
      expect(await response.text()).toBe(expected);
    }
  });

  it('answers every verb of both eras without a token 401 with resource_metadata and scope', async () => {
    const requests: [string, () => Promise<Response>][] = [
      ['initialize', () => post(initializeRequest(7))],
      ['2026 tools/call', () => modern(modernRequest(8, 'tools/call', { name: 'test_simple_text', arguments: {} }))],
      ['GET', () => fetch(mcpUrl, { headers: { accept: 'text/event-stream', 'mcp-session-id': 'x', 'mcp-protocol-version': PROTOCOL } })],
      ['DELETE', () => fetch(mcpUrl, { method: 'DELETE', headers: { 'mcp-session-id': 'x' } })],
    ];
    for (const [what, send] of requests) {
      const response = await send();
      expect(response.status, what).toBe(401);
      expect(response.headers.get('www-authenticate'), what).toBe(`Bearer resource_metadata="${metadataUrl()}", scope="mcp"`);
      const body = await response.json();
      expect(body.error, what).toMatchObject({ code: -32000, data: { error: 'unauthorized' } });
      expect('id' in body, what).toBe(false);
    }
  });

  it('refuses every bad token with invalid_token on every verb of both eras; the session survives', async () => {
    const session = await openSession(bearer(await token()));
    const now = Math.floor(Date.now() / 1000);
    const bad: [string, string][] = [
      ['expired', await token({ claims: { exp: now - 60 } })],
      ['not yet valid', await token({ claims: { nbf: now + 600 } })],
      ["another resource's audience", await issuer.jwt(`${origin}/other`)],
      ['another issuer', await token({ claims: { iss: `${issuer.issuer}/` } })],
      ['alg none', issuer.unsigned(mcpUrl)],
      ['a tampered signature', tamper(await token())],
      ['a key the JWKS does not have', await token({ unpublishedKey: true })],
    ];
    for (const [what, t] of bad) {
      const headers = { ...session, ...bearer(t) };
      const attempts: [string, () => Promise<Response>][] = [
        ['initialize', () => post(initializeRequest(3), bearer(t))],
        ['tools/call in the session', () => post(callTool(4, 'test_simple_text'), headers)],
        ['GET', () => fetch(mcpUrl, { headers: { accept: 'text/event-stream', 'mcp-protocol-version': PROTOCOL, ...headers } })],
        ['DELETE', () => fetch(mcpUrl, { method: 'DELETE', headers: { 'mcp-protocol-version': PROTOCOL, ...headers } })],
        ['2026 tools/call', () => modern(modernRequest(5, 'tools/call', { name: 'test_simple_text', arguments: {} }), bearer(t))],
      ];
      for (const [verb, send] of attempts) {
        const response = await send();
        expect(response.status, `${what}, ${verb}`).toBe(401);
        expect(response.headers.get('www-authenticate'), `${what}, ${verb}`).toMatch(
          new RegExp(`^Bearer error="invalid_token", error_description="[^"]+", scope="mcp", resource_metadata="${metadataUrl()}"$`),
        );
        expect((await response.json()).error.data.error).toBe('invalid_token');
      }
    }
    // No refused DELETE ended it.
    const answer = await modernAnswer(await post(callTool(6, 'test_simple_text'), session));
    expect(answer.answer.result.content[0].type).toBe('text');
  });

  it('refuses a token in the query string with 400 invalid_request', async () => {
    const response = await post(initializeRequest(1), {}, `${mcpUrl}?access_token=${await token()}`);
    expect(response.status).toBe(400);
    expect(response.headers.get('www-authenticate')).toMatch(/^Bearer error="invalid_request", /);
  });

  it('403 insufficient_scope for the endpoint and for long_task (both eras), then the stepped-up token runs it', async () => {
    const noScope = await post(initializeRequest(1), bearer(await token({ claims: { scope: 'openid' } })));
    expect(noScope.status).toBe(403);
    expect(noScope.headers.get('www-authenticate')).toContain('error="insufficient_scope"');

    const session = await openSession(bearer(await token()));
    const call = callTool(2, 'long_task', { steps: 1, intervalMs: 0 });
    const forbidden = await post(call, session);
    expect(forbidden.status).toBe(403);
    expect(forbidden.headers.get('www-authenticate')).toBe(
      `Bearer error="insufficient_scope", error_description="this request needs the scope mcp mcp:long", scope="mcp mcp:long", resource_metadata="${metadataUrl()}"`,
    );
    expect(await forbidden.json()).toMatchObject({ id: 2, error: { data: { error: 'insufficient_scope' } } });
    const stepped = bearer(await token({ claims: { scope: 'mcp mcp:long' } }));
    expect((await modernAnswer(await post(call, { ...session, ...stepped }))).answer.result.content[0].text).toBe('completed 1 steps');

    const modernCall = modernRequest(3, 'tools/call', { name: 'long_task', arguments: { steps: 1, intervalMs: 0 } });
    expect((await modern(modernCall, bearer(await token()))).status).toBe(403);
    expect((await modernAnswer(await modern(modernCall, stepped))).answer.result.content[0].text).toBe('completed 1 steps');
  });

  it("another principal's valid token cannot use a session (403)", async () => {
    const session = await openSession(bearer(await token()));
    const refused = await post(callTool(2, 'test_simple_text'), { ...session, ...bearer(await token({ claims: { sub: 'mallory' } })) });
    expect(refused.status).toBe(403);
    expect((await refused.json()).error.message).toMatch(/another principal/);
  });
});
