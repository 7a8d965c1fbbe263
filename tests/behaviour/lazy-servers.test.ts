/**
 * `lazyServers`: a session's server is built when a request first needs one. The first
 * `initialize` of its kind is answered by a server of the factory; a later one that sends the same
 * params (as the same principal) gets that very answer without a server, and its server is built at
 * its first request, told the client's `initialize` first. Observed over real HTTP on Express, with
 * SDK v1 and raw clients; the factory records each call.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { ServerFactoryContext } from '@mcp-kit/core';
import { createFixtureServer } from '@mcp-kit/fixtures';
import { expressAdapter, type HarnessOptions, type ServerUnderTest } from '@mcp-kit/testbed/adapters';
import { callTool, initializeRequest, LEGACY as PROTOCOL } from '@mcp-kit/testbed/requests';
import { http } from '@mcp-kit/testbed/fetch-client';

/** The fixture, plus `whoami` (what this server knows of its client), counting factory calls and `oninitialized`. */
function harness(extra: HarnessOptions = {}) {
  const built: ServerFactoryContext[] = [];
  const initialized: number[] = [];
  const server = (context: ServerFactoryContext) => {
    built.push(context);
    const index = built.length;
    const mcp: McpServer = createFixtureServer();
    mcp.registerTool('whoami', { description: 'What this server knows of its client' }, () => ({
      content: [
        {
          type: 'text',
          text: JSON.stringify({
            server: index,
            client: mcp.server.getClientVersion(),
            capabilities: mcp.server.getClientCapabilities(),
          }),
        },
      ],
    }));
    mcp.server.oninitialized = () => initialized.push(index);
    return mcp;
  };
  return { options: { server, ...extra } satisfies HarnessOptions, built, initialized };
}

/** The messages an SSE answer carries. */
async function messagesOf(response: Response): Promise<Array<Record<string, any>>> {
  expect(response.status).toBe(200);
  return (await response.text())
    .split('\n')
    .filter((line) => line.startsWith('data: {'))
    .map((line) => JSON.parse(line.slice(6)) as Record<string, any>);
}

/** `initialize` with these params, then `notifications/initialized`: the session's headers and the initialize answer's result. */
async function initialize(url: string, params: Record<string, unknown> = initializeRequest().params) {
  const api = http(url);
  const response = await api.post({ jsonrpc: '2.0', id: 1, method: 'initialize', params });
  const sessionId = response.headers.get('mcp-session-id')!;
  const [answer] = await messagesOf(response);
  const headers = { 'mcp-session-id': sessionId, 'mcp-protocol-version': PROTOCOL };
  expect((await api.post({ jsonrpc: '2.0', method: 'notifications/initialized' }, headers)).status).toBe(202);
  return { headers, result: answer!.result as Record<string, unknown> };
}

async function whoami(url: string, headers: Record<string, string>, id = 2) {
  const [answer] = await messagesOf(await http(url).post(callTool(id, 'whoami'), headers));
  return JSON.parse(answer!.result.content[0].text) as { server: number; client: unknown; capabilities: unknown };
}

describe('lazyServers', () => {
  let sut: ServerUnderTest;
  afterEach(async () => {
    await sut?.close();
  });

  it('a second initialize like the first gets the same answer without a server; its server is built at its first request and knows the client', async () => {
    const h = harness({ lazyServers: true });
    sut = await expressAdapter.start(h.options);
    const params = { ...initializeRequest().params, capabilities: { sampling: {} }, clientInfo: { name: 'lazy-client', version: '2.0.0' } };
    const first = await initialize(sut.url, params);
    expect(h.built).toHaveLength(1);
    const second = await initialize(sut.url, params);
    // Answered, and `notifications/initialized` taken, without a server of its own.
    expect(second.result).toEqual(first.result);
    expect(h.built).toHaveLength(1);
    expect(sut.inProcess!.handler.hibernatedSessionCount).toBe(1);
    // Its first request builds its server (a first one: not restoring), told the client's initialize.
    const known = await whoami(sut.url, second.headers);
    expect(h.built).toHaveLength(2);
    expect(h.built[1]).toEqual({ era: 'legacy', sessionId: second.headers['mcp-session-id'], restoring: false });
    expect(known).toEqual({ server: 2, client: { name: 'lazy-client', version: '2.0.0' }, capabilities: { sampling: {} } });
    // Its server heard `notifications/initialized` once (the replay's; the client's own went to no server).
    expect(h.initialized).toEqual([1, 2]);
    // The first session kept the server that answered it.
    expect((await whoami(sut.url, first.headers, 3)).server).toBe(1);
    expect(h.built).toHaveLength(2);
    expect(sut.errors).toEqual([]);
  });

  it('an initialize that differs (client info, capabilities, protocol version) is answered by a server of its own', async () => {
    const h = harness({ lazyServers: true });
    sut = await expressAdapter.start(h.options);
    const base = initializeRequest().params;
    await initialize(sut.url, base);
    await initialize(sut.url, { ...base, clientInfo: { name: 'other', version: '1.0.0' } });
    await initialize(sut.url, { ...base, capabilities: { elicitation: {} } });
    const older = await initialize(sut.url, { ...base, protocolVersion: '2025-06-18' });
    expect(h.built).toHaveLength(4);
    expect(older.result.protocolVersion).toBe('2025-06-18');
    // The same as the first, `_meta` aside: no server.
    await initialize(sut.url, { ...base, _meta: { progressToken: 7 } });
    expect(h.built).toHaveLength(4);
  });

  it('an initialize no server accepts is answered by a server each time, with its error, and never from an earlier answer', async () => {
    const h = harness({ lazyServers: true });
    sut = await expressAdapter.start(h.options);
    const broken = { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: 'no-version' } };
    for (let i = 0; i < 2; i++) {
      const response = await http(sut.url).post({ jsonrpc: '2.0', id: 1, method: 'initialize', params: broken });
      const [answer] = await messagesOf(response);
      expect([typeof answer!.error?.message, answer!.result]).toEqual(['string', undefined]);
    }
    expect(h.built).toHaveLength(2);
  });

  it('an SDK client on a session answered without a server: tools, a call and a log level, as on any session', async () => {
    const h = harness({ lazyServers: true });
    sut = await expressAdapter.start(h.options);
    const clients: Client[] = [];
    try {
      for (let i = 0; i < 2; i++) {
        const client = new Client({ name: 'sdk-lazy', version: '1.0.0' });
        await client.connect(new StreamableHTTPClientTransport(new URL(sut.url)));
        clients.push(client);
      }
      const lazy = clients[1]!;
      expect(lazy.getServerVersion()).toEqual(clients[0]!.getServerVersion());
      expect(lazy.getServerCapabilities()).toEqual(clients[0]!.getServerCapabilities());
      await lazy.setLoggingLevel('error');
      expect((await lazy.listTools()).tools.map((t) => t.name)).toContain('whoami');
      const result = await lazy.callTool({ name: 'test_simple_text', arguments: {} });
      expect(result.content).toEqual([{ type: 'text', text: 'This is a simple text response for testing.' }]);
      expect(h.built.map((c) => c.restoring)).toEqual([false, false]);
      expect(sut.errors).toEqual([]);
    } finally {
      for (const client of clients) await client.close();
    }
  });

  it('off: every initialize gets a server of its own; the default is on with hibernateAfterMs and off without', async () => {
    for (const [extra, servers] of [
      [{ lazyServers: false, hibernateAfterMs: 60_000 }, 3],
      [{}, 3],
      [{ hibernateAfterMs: 60_000 }, 1],
    ] as const) {
      const h = harness(extra);
      sut = await expressAdapter.start(h.options);
      for (let i = 0; i < 3; i++) await initialize(sut.url);
      expect([extra, h.built.length]).toEqual([extra, servers]);
      await sut.close();
    }
  });
});
