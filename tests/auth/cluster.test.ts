/**
 * With Redis (both cluster modes), a session created on one instance is served on another only to
 * the principal that created it, now that the principal comes from a verified token: two Express
 * instances in this process, each a resource server checking JWTs of one local issuer against its
 * JWKS, sharing one real redis-server. In forwarding mode the owner verifies the forwarded token
 * itself (the Authorization header travels with the forward; a peer's say-so is not an identity);
 * in shared mode the instance that serves a copy checks the principal its record was saved with.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createMcpHandler, FORWARDED_HEADER, jwtVerifier, type McpHandler, type TokenVerifier } from '@mcp-kit/core';
import { mcpExpress } from '@mcp-kit/express';
import { createFixtureServer } from '@mcp-kit/fixtures';
import { createRedisClient, createRedisScaleOut } from '@mcp-kit/redis';
import { envelope, modernRequest, routingHeaders, callTool, initializeRequest, LEGACY as PROTOCOL } from '@mcp-kit/testbed/requests';
import { modernAnswer } from '@mcp-kit/testbed/fetch-client';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';
import { startTokenIssuer, type TokenIssuer } from '@mcp-kit/testbed/token-issuer';

/** The resource every instance serves: what clients ask tokens for, behind whatever balances them. */
const RESOURCE = 'http://mcp.example.test/mcp';

let redis: TestRedis;
let issuer: TokenIssuer;
let nodes: Node[] = [];

beforeAll(async () => {
  [redis, issuer] = await Promise.all([startRedis(), startTokenIssuer()]);
});
afterEach(async () => {
  for (const node of nodes) await node.close();
  nodes = [];
});
afterAll(async () => {
  await issuer?.close();
  await redis?.stop();
});

interface Node {
  url: string;
  handler: McpHandler;
  /** Tokens this instance's verifier was asked about. */
  verified: string[];
  /** The `authInfo` each `whoami` call on this instance saw: client and user. */
  whoami: string[];
  close(): Promise<void>;
}

async function startNode(mode: 'forward' | 'shared'): Promise<Node> {
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  const client = createRedisClient(redis.url);
  const scaleOut = createRedisScaleOut({ client, ...(mode === 'shared' ? { mode: 'shared' } : { internalUrl: url }), heartbeatMs: 500 });
  const verified: string[] = [];
  const whoami: string[] = [];
  const jwt = jwtVerifier({ issuer: issuer.issuer });
  const verifier: TokenVerifier = (token, ctx) => {
    verified.push(token);
    return jwt(token, ctx);
  };
  const handler = createMcpHandler({
    server: () => {
      const fixture = createFixtureServer() as any;
      fixture.registerTool('whoami', {}, (extra: any) => {
        whoami.push(`${extra.authInfo?.clientId}/${extra.authInfo?.extra?.sub}`);
        return { content: [{ type: 'text', text: 'ok' }] };
      });
      return fixture;
    },
    retryMs: 100,
    eventStore: scaleOut.eventStore,
    cluster: scaleOut.cluster,
    taskStore: scaleOut.taskStore,
    onError: () => {},
    auth: { authorizationServers: [issuer.issuer], resource: RESOURCE, verifier, scopes: ['mcp'], toolScopes: { long_task: ['mcp:long'] } },
  });
  const app = express();
  app.use('/mcp', mcpExpress(handler));
  server.on('request', app);
  await scaleOut.ready();
  return {
    url,
    handler,
    verified,
    whoami,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await handler.close().catch(() => {});
      client.disconnect();
    },
  };
}

const post = (url: string, body: unknown, headers: Record<string, string>) =>
  fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': PROTOCOL,
      ...headers,
    },
    body: JSON.stringify(body),
  });
const bearer = async (sub: string, scope = 'mcp') => ({
  authorization: `Bearer ${await issuer.jwt(RESOURCE, { claims: { sub, scope } })}`,
});
const modern = (url: string, body: any, headers: Record<string, string>) =>
  fetch(url, { method: 'POST', headers: { ...routingHeaders(body), ...headers }, body: JSON.stringify(body) });

describe.each(['forward', 'shared'] as const)('a session across instances (%s mode) serves only its own principal', (mode) => {
  it("principal B's valid token cannot use principal A's session on the other instance, on any verb; A's can", async () => {
    const [a, b] = await Promise.all([startNode(mode), startNode(mode)]);
    nodes.push(a, b);
    const alice = await bearer('alice');
    const init = await post(a.url, initializeRequest(1), alice);
    expect(init.status).toBe(200);
    const sessionId = init.headers.get('mcp-session-id')!;
    await modernAnswer(init);
    const session = { 'mcp-session-id': sessionId };
    expect((await post(a.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, { ...session, ...alice })).status).toBe(202);

    const bob = { ...session, ...(await bearer('bob')) };
    const attempts: [string, () => Promise<Response>][] = [
      ['POST', () => post(b.url, callTool(2, 'whoami'), bob)],
      ['GET', () => fetch(b.url, { headers: { accept: 'text/event-stream', 'mcp-protocol-version': PROTOCOL, ...bob } })],
      ['DELETE', () => fetch(b.url, { method: 'DELETE', headers: { 'mcp-protocol-version': PROTOCOL, ...bob } })],
    ];
    for (const [verb, attempt] of attempts) {
      const response = await attempt();
      expect(response.status, verb).toBe(403);
      expect((await response.json()).error.message, verb).toMatch(/another principal/);
    }
    expect([...a.whoami, ...b.whoami]).toEqual([]);

    // Alice's own token on the other instance: served, and the tool sees her verified identity.
    const verifiedOnA = a.verified.length;
    const aliceB = await post(b.url, callTool(3, 'whoami'), { ...session, ...alice });
    expect(aliceB.status).toBe(200);
    expect((await modernAnswer(aliceB)).answer.result.content[0].text).toBe('ok');
    expect([...a.whoami, ...b.whoami]).toEqual(['client-a/alice']);
    if (mode === 'forward') {
      // Forwarded to the owner, which checked the token itself: the Authorization header travelled.
      expect(a.whoami).toEqual(['client-a/alice']);
      expect(a.verified.slice(verifiedOnA)).toEqual([alice.authorization.slice('Bearer '.length)]);
    }
  });

  it("a task made on one instance is polled on the other only with its tool's scopes, and only by its principal", async () => {
    const [a, b] = await Promise.all([startNode(mode), startNode(mode)]);
    nodes.push(a, b);
    const withTasks = envelope({ 'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } } });
    const full = await bearer('alice', 'mcp mcp:long');
    const args = { steps: 2, intervalMs: 20, closeEvery: 1, retryMs: 50 };
    const created = await modernAnswer(
      await modern(a.url, modernRequest(1, 'tools/call', { name: 'long_task', arguments: args }, withTasks), full),
    );
    expect(created.answer.result.resultType).toBe('task');
    const get = (id: number, auth: Record<string, string>) =>
      modern(b.url, modernRequest(id, 'tasks/get', { taskId: created.answer.result.taskId }, withTasks), auth);
    // The record in Redis names its tool: the other instance asks for the tool's scope.
    const refused = await get(2, await bearer('alice'));
    expect(refused.status).toBe(403);
    expect(refused.headers.get('www-authenticate')).toContain('scope="mcp mcp:long"');
    expect((await modernAnswer(await get(3, await bearer('bob', 'mcp mcp:long')))).answer.error.code).toBe(-32602);
    let task: any;
    for (let id = 4; !task || task.status === 'working'; id++) {
      if (task) await new Promise((r) => setTimeout(r, task.pollIntervalMs));
      task = (await modernAnswer(await get(id, full))).answer.result;
    }
    expect(task).toMatchObject({ status: 'completed', result: { content: [{ text: 'completed 2 steps' }] } });
  });

  it("a request claiming to be a peer's forward is still asked for a token", async () => {
    const a = await startNode(mode);
    nodes.push(a);
    const response = await post(a.url, callTool(2, 'whoami'), { [FORWARDED_HEADER]: 'some-instance', 'mcp-session-id': 'x' });
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe(
      `Bearer resource_metadata="http://mcp.example.test/.well-known/oauth-protected-resource/mcp", scope="mcp"`,
    );
  });
});
