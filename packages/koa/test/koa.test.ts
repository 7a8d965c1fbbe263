/**
 * Koa-specific quirks of `mcpKoa`: body parsers before it, mounting (`path` option or
 * `@koa/router`), falling through to later middleware, `ctx.respond` and which errors reach Koa's
 * error handling, auth from `ctx.state`. The SEP-1699 behaviour itself is covered by the shared
 * behaviour suite that runs against every adapter.
 */
import type { Server } from 'node:http';
import { connect as connectTcp, type AddressInfo } from 'node:net';
import { bodyParser } from '@koa/bodyparser';
import Router from '@koa/router';
import Koa from 'koa';
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createMcpHandler, type McpHandler } from '@mcp-kit/core';
import { createFixtureServer } from '@mcp-kit/fixtures';
import { mcpKoa } from '@mcp-kit/koa';
import { messagesOf, parseSse } from '@mcp-kit/testbed/sse';

const ACCEPT = 'application/json, text/event-stream';
const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'koa-test', version: '0.0.0' } },
};

interface Running {
  origin: string;
  /** What reached `app.on('error')`. */
  appErrors: Error[];
  /** What the core reported through `onError`. */
  coreErrors: Error[];
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

/** A handler serving the fixture; `server` overrides it for tests that need their own tools. */
function handler(coreErrors: Error[], server: () => McpServer = () => createFixtureServer()): McpHandler {
  return createMcpHandler({ server, retryMs: 500, onError: (e) => coreErrors.push(e) });
}

/** Builds an app around a fresh handler, listens on 127.0.0.1:0, closes everything after the test. */
async function start(build: (app: Koa, mcp: McpHandler) => void, server?: () => McpServer): Promise<Running> {
  const appErrors: Error[] = [];
  const coreErrors: Error[] = [];
  const mcp = handler(coreErrors, server);
  const app = new Koa();
  app.silent = true;
  app.on('error', (error: Error) => appErrors.push(error));
  build(app, mcp);
  const http: Server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  cleanups.push(async () => {
    await mcp.close();
    http.closeAllConnections();
    await new Promise<void>((resolve) => http.close(() => resolve()));
  });
  const { port } = http.address() as AddressInfo;
  return { origin: `http://127.0.0.1:${port}`, appErrors, coreErrors };
}

/** Connects the SDK client; the transport is closed after the test. */
async function connect(url: string): Promise<Client> {
  const client = new Client({ name: 'koa-test', version: '0.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  cleanups.unshift(() => client.close());
  return client;
}

async function callSimpleText(url: string): Promise<void> {
  const client = await connect(url);
  const result = await client.callTool({ name: 'test_simple_text', arguments: {} });
  expect(result.content).toEqual([{ type: 'text', text: 'This is a simple text response for testing.' }]);
}

/** A raw POST of `body` (a string is sent as is). */
function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: ACCEPT, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

/** The JSON-RPC messages of an SSE response that has ended. */
async function sseMessages(res: Response): Promise<unknown[]> {
  return messagesOf(parseSse(await res.text()));
}

describe('body parsers', () => {
  it('reads the body itself when no parser runs before it', async () => {
    const { origin, appErrors } = await start((app, mcp) => app.use(mcpKoa(mcp, { path: '/mcp' })));
    await callSimpleText(`${origin}/mcp`);
    expect(appErrors).toEqual([]);
  });

  it('uses the body @koa/bodyparser already parsed (the stream is gone by then)', async () => {
    const consumedBefore: boolean[] = [];
    const { origin, appErrors } = await start((app, mcp) => {
      app.use(bodyParser());
      app.use(async (ctx, next) => {
        if (ctx.method === 'POST') consumedBefore.push(ctx.req.readableEnded);
        await next();
      });
      app.use(mcpKoa(mcp, { path: '/mcp' }));
    });
    await callSimpleText(`${origin}/mcp`);
    // initialize, notifications/initialized, tools/call: every body was parsed before mcpKoa ran.
    expect(consumedBefore.length).toBeGreaterThanOrEqual(3);
    expect(consumedBefore.every(Boolean)).toBe(true);
    expect(appErrors).toEqual([]);
  });

  it('reads the stream when @koa/bodyparser skipped the content type and left `body = {}`', async () => {
    const bodies: unknown[] = [];
    const { origin } = await start((app, mcp) => {
      app.use(bodyParser({ enableTypes: ['form'] }));
      app.use(async (ctx, next) => {
        bodies.push(ctx.request.body);
        await next();
      });
      app.use(mcpKoa(mcp, { path: '/mcp' }));
    });
    const res = await post(`${origin}/mcp`, INITIALIZE);
    expect(res.status).toBe(200);
    expect(bodies).toEqual([{}]);
    const [message] = await sseMessages(res);
    expect(message).toMatchObject({ id: 1, result: { protocolVersion: '2025-11-25' } });
  });
});

describe('mounting', () => {
  it('serves only its `path` (trailing slash allowed); other paths reach the next middleware', async () => {
    const { origin } = await start((app, mcp) => {
      app.use(mcpKoa(mcp, { path: '/mcp' }));
      app.use((ctx) => {
        if (ctx.path === '/hello') ctx.body = 'hello from koa';
      });
    });
    const hello = await fetch(`${origin}/hello`);
    expect(hello.status).toBe(200);
    expect(await hello.text()).toBe('hello from koa');
    // Koa's own 404, not a JSON-RPC error: the request never reached the core.
    for (const path of ['/other', '/mcp/deeper', '/mcpx']) {
      const res = await post(`${origin}${path}`, INITIALIZE);
      expect(res.status, path).toBe(404);
      expect(await res.text(), path).toBe('Not Found');
    }
    const slash = await post(`${origin}/mcp/`, INITIALIZE);
    expect(slash.status).toBe(200);
    expect(slash.headers.get('mcp-session-id')).toBeTruthy();
    await slash.body?.cancel();
  });

  it('works as a @koa/router route next to the router’s other routes', async () => {
    const { origin, appErrors } = await start((app, mcp) => {
      const router = new Router({ prefix: '/api' });
      router.get('/health', (ctx) => {
        ctx.body = { ok: true };
      });
      router.all('/mcp', mcpKoa(mcp));
      app.use(router.routes()).use(router.allowedMethods());
    });
    await callSimpleText(`${origin}/api/mcp`);
    const health = await fetch(`${origin}/api/health`);
    expect(await health.json()).toEqual({ ok: true });
    expect((await fetch(`${origin}/api/nothing`)).status).toBe(404);
    expect((await fetch(`${origin}/mcp`)).status).toBe(404);
    expect(appErrors).toEqual([]);
  });

  it('lets middleware before it see the status the bridge wrote, not Koa’s default 404', async () => {
    const seen: number[] = [];
    const { origin } = await start((app, mcp) => {
      app.use(async (ctx, next) => {
        await next();
        seen.push(ctx.status);
      });
      app.use(mcpKoa(mcp, { path: '/mcp' }));
    });
    const res = await post(`${origin}/mcp`, INITIALIZE);
    await res.text();
    const missing = await post(`${origin}/mcp`, '{', {});
    await missing.text();
    expect(seen).toEqual([200, 400]);
  });
});

describe('streaming', () => {
  it('leaves a stream that outlives the middleware to the bridge: Koa writes nothing into it', async () => {
    const { origin, appErrors } = await start((app, mcp) => app.use(mcpKoa(mcp, { path: '/mcp' })));
    const init = await post(`${origin}/mcp`, INITIALIZE);
    const session = init.headers.get('mcp-session-id')!;
    await init.text();
    const headers = { 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' };
    const call = { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'long_task', arguments: { steps: 3, intervalMs: 20 } } };
    const res = await post(`${origin}/mcp`, call, headers);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const raw = await res.text();
    // Every block is an SSE event; a Koa response written after the middleware returned would
    // show up as a stray line ("OK") and cut the stream before the result.
    for (const block of parseSse(raw)) {
      for (const line of block.raw.split('\n')) expect(line).toMatch(/^(id|data|retry): ?/);
    }
    const messages = await sseMessages(new Response(raw));
    expect(messages.at(-1)).toMatchObject({ id: 2, result: { content: [{ type: 'text', text: 'completed 3 steps' }] } });
    expect(messages.filter((m) => (m as { method?: string }).method === 'notifications/message')).toHaveLength(3);
    expect(appErrors).toEqual([]);
  });
});

describe('errors', () => {
  it('answers protocol errors with JSON-RPC and keeps them away from app.on("error")', async () => {
    const { origin, appErrors, coreErrors } = await start((app, mcp) => app.use(mcpKoa(mcp, { path: '/mcp' })));

    const malformed = await post(`${origin}/mcp`, '{"jsonrpc": "2.0", "id": 1,');
    expect(malformed.status).toBe(400);
    expect(malformed.headers.get('content-type')).toBe('application/json');
    const body = await malformed.json();
    expect(body).toMatchObject({ jsonrpc: '2.0', error: { code: -32700 } });
    expect(body).not.toHaveProperty('id');

    const unknown = await post(
      `${origin}/mcp`,
      { jsonrpc: '2.0', id: 2, method: 'tools/list' },
      {
        'mcp-session-id': 'no-such-session',
        'mcp-protocol-version': '2025-11-25',
      },
    );
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ jsonrpc: '2.0', error: { code: -32001 } });

    const wrongMethod = await fetch(`${origin}/mcp`, { method: 'PUT' });
    expect(wrongMethod.status).toBe(405);

    expect(appErrors).toEqual([]);
    expect(coreErrors).toEqual([]);
  });

  it('keeps a client that resets its SSE connection away from app.on("error"): it left, it will resume', async () => {
    const { origin, appErrors, coreErrors } = await start((app, mcp) => app.use(mcpKoa(mcp, { path: '/mcp' })));
    const init = await post(`${origin}/mcp`, INITIALIZE);
    const sessionId = init.headers.get('mcp-session-id') as string;
    await init.text();
    const { port } = new URL(origin);
    // Three standalone-stream GETs of the session, one after the other, each cut with a TCP RST
    // (what a killed client or a proxy's abort looks like) once the stream is open.
    for (let i = 0; i < 3; i++) {
      const socket = connectTcp(Number(port), '127.0.0.1');
      await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
      const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
      socket.write(
        `GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAccept: text/event-stream\r\nMcp-Session-Id: ${sessionId}\r\nMcp-Protocol-Version: 2025-11-25\r\n\r\n`,
      );
      let head = '';
      await new Promise<void>((resolve) =>
        socket.on('data', (chunk: Buffer) => {
          head += chunk.toString('latin1');
          if (head.includes('\r\n\r\nid: ') || head.includes('data:')) resolve();
        }),
      );
      expect(head.startsWith('HTTP/1.1 200')).toBe(true);
      socket.resetAndDestroy();
      await closed;
    }
    // The session still serves, and nothing was reported as an application error.
    const list = await post(
      `${origin}/mcp`,
      { jsonrpc: '2.0', id: 3, method: 'tools/list' },
      { 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' },
    );
    expect(list.status).toBe(200);
    expect((await sseMessages(list)).length).toBe(1);
    expect(appErrors.map((e) => `${(e as { code?: string }).code}: ${e.message}`)).toEqual([]);
    expect(coreErrors).toEqual([]);
  });

  it('leaves an exception thrown by a middleware before it to Koa', async () => {
    const { origin, appErrors } = await start((app, mcp) => {
      app.use(async (ctx, next) => {
        if (ctx.get('x-fail') === 'yes') throw new Error('auth backend down');
        await next();
      });
      app.use(mcpKoa(mcp, { path: '/mcp' }));
    });
    const res = await post(`${origin}/mcp`, INITIALIZE, { 'x-fail': 'yes' });
    expect(res.status).toBe(500);
    expect(await res.text()).toBe('Internal Server Error');
    expect(appErrors.map((e) => e.message)).toEqual(['auth backend down']);
  });

  it('throws its own real failures to Koa, which can still render the response', async () => {
    const { origin, appErrors } = await start((app, mcp) => {
      // An error-rendering middleware: it only works if mcpKoa hands `ctx.respond` back.
      app.use(async (ctx, next) => {
        try {
          await next();
        } catch (error) {
          ctx.status = 503;
          ctx.body = { message: (error as Error).message };
          ctx.app.emit('error', error, ctx);
        }
      });
      app.use(
        mcpKoa(mcp, {
          path: '/mcp',
          getAuthInfo: () => {
            throw new Error('token introspection failed');
          },
        }),
      );
    });
    const res = await post(`${origin}/mcp`, INITIALIZE);
    expect(res.status).toBe(503);
    expect(await res.json()).toEqual({ message: 'token introspection failed' });
    expect(appErrors.map((e) => e.message)).toEqual(['token introspection failed']);
  });
});

describe('auth', () => {
  /** A server whose `whoami` tool reports what its handler received. */
  function whoamiServer(): McpServer {
    const server = new McpServer({ name: 'whoami', version: '0.0.0' });
    server.registerTool('whoami', { description: 'Echoes extra.authInfo and the request URL' }, (extra) => ({
      content: [
        {
          type: 'text',
          text: JSON.stringify({ authInfo: extra.authInfo ?? null, url: extra.requestInfo?.url?.href ?? null }),
        },
      ],
    }));
    return server;
  }

  async function whoami(url: string): Promise<{ authInfo: unknown; url: string | null }> {
    const client = await connect(url);
    const result = await client.callTool({ name: 'whoami', arguments: {} });
    const [item] = result.content as Array<{ type: string; text: string }>;
    return JSON.parse(item!.text);
  }

  it('passes ctx.state.auth to tool handlers as extra.authInfo by default', async () => {
    const auth = { token: 't0k3n', clientId: 'client-a', scopes: ['mcp:tools'] };
    const { origin } = await start((app, mcp) => {
      app.use(async (ctx, next) => {
        ctx.state.auth = auth;
        await next();
      });
      app.use(mcpKoa(mcp, { path: '/mcp' }));
    }, whoamiServer);
    const seen = await whoami(`${origin}/mcp`);
    expect(seen.authInfo).toEqual(auth);
    expect(seen.url).toBe(`${origin}/mcp`);
  });

  it('takes auth from getAuthInfo when given, under a router prefix', async () => {
    const { origin } = await start((app, mcp) => {
      const router = new Router({ prefix: '/v1' });
      router.all(
        '/mcp',
        async (ctx, next) => {
          ctx.state.user = { token: 'u', clientId: 'client-b', scopes: [] };
          await next();
        },
        mcpKoa(mcp, { getAuthInfo: (ctx) => ctx.state.user }),
      );
      app.use(router.routes());
    }, whoamiServer);
    const seen = await whoami(`${origin}/v1/mcp`);
    expect(seen.authInfo).toEqual({ token: 'u', clientId: 'client-b', scopes: [] });
    expect(seen.url).toBe(`${origin}/v1/mcp`);
  });
});
