/** Express-specific quirks; the shared behaviour suite lives in tests/behaviour. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type ErrorRequestHandler, type RequestHandler } from 'express';
import request from 'supertest';
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { createMcpHandler, type McpHandler } from '@mcp-kit/core';
import { createFixtureServer } from '@mcp-kit/fixtures';
import { mcpExpress, mcpFirst } from '../src/index.js';

const INIT = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } },
};
const HEADERS = { accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-protocol-version': '2025-11-25' };

const handlers: McpHandler[] = [];
const servers: Server[] = [];
afterEach(async () => {
  for (const h of handlers.splice(0)) await h.close();
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

function handler(options: Partial<Parameters<typeof createMcpHandler>[0]> = {}): McpHandler {
  const h = createMcpHandler({ server: () => createFixtureServer(), ...options });
  handlers.push(h);
  return h;
}

async function listen(app: express.Express): Promise<string> {
  const server = createServer(app);
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function callSimpleText(url: string): Promise<string> {
  const client = new Client({ name: 'express-test', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  try {
    const result = await client.callTool({ name: 'test_simple_text', arguments: {} });
    return (result.content as Array<{ text: string }>)[0]!.text;
  } finally {
    await client.close();
  }
}

describe('mcpExpress', () => {
  it('works without a body parser (reads the body itself)', async () => {
    const app = express();
    app.use('/mcp', mcpExpress(handler()));
    expect(await callSimpleText(`${await listen(app)}/mcp`)).toMatch(/test/i);
  });

  it('uses the body express.json() already parsed', async () => {
    const app = express();
    app.use(express.json());
    app.use('/mcp', mcpExpress(handler()));
    expect(await callSimpleText(`${await listen(app)}/mcp`)).toMatch(/test/i);
  });

  it('works mounted at a nested path and as a route', async () => {
    const app = express();
    const router = express.Router();
    router.use('/v1/mcp', mcpExpress(handler()));
    app.use('/api', router);
    app.all('/route-mcp', mcpExpress(handler()));
    const base = await listen(app);
    expect(await callSimpleText(`${base}/api/v1/mcp`)).toMatch(/test/i);
    expect(await callSimpleText(`${base}/route-mcp`)).toMatch(/test/i);
  });

  it('lets paths below the mount point fall through to next()', async () => {
    const app = express();
    app.use('/mcp', mcpExpress(handler()));
    app.get('/mcp/health', (_req, res) => {
      res.json({ ok: true });
    });
    const res = await request(app).get('/mcp/health');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ok: true });
  });

  it('answers protocol errors itself; they never reach the error handler', async () => {
    const seen: unknown[] = [];
    const app = express();
    app.use('/mcp', mcpExpress(handler()));
    app.use(((err, _req, res, _next) => {
      seen.push(err);
      res.status(500).end();
    }) as ErrorRequestHandler);
    const res = await request(app).post('/mcp').set(HEADERS).send('{"jsonrpc":');
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe(-32700);
    const unknown = await request(app)
      .post('/mcp')
      .set({ ...HEADERS, 'mcp-session-id': 'gone' })
      .send({ jsonrpc: '2.0', id: 2, method: 'tools/list' });
    expect(unknown.status).toBe(404);
    expect(seen).toEqual([]);
  });

  it('passes real failures to next(err)', async () => {
    const seen: Error[] = [];
    const app = express();
    const broken = createMcpHandler({ server: () => createFixtureServer() });
    handlers.push(broken);
    // A handler whose engine throws: a bug, not a protocol error.
    const failing: McpHandler = Object.create(broken);
    failing.handle = async () => Promise.reject(new Error('engine exploded'));
    app.use('/mcp', mcpExpress(failing));
    app.use(((err, _req, res, _next) => {
      seen.push(err);
      res.status(500).json({ handled: true });
    }) as ErrorRequestHandler);
    const res = await request(app).post('/mcp').set(HEADERS).send(INIT);
    expect(res.status).toBe(500);
    expect(seen.map((e) => e.message)).toEqual(['engine exploded']);
  });

  it('passes req.auth to tool handlers as extra.authInfo', async () => {
    let seen: AuthInfo | undefined;
    const h = createMcpHandler({
      server: () => {
        const server = new McpServer({ name: 'auth-test', version: '1' });
        server.registerTool('whoami', {}, async (extra) => {
          seen = extra.authInfo;
          return { content: [{ type: 'text', text: String(extra.authInfo?.clientId) }] };
        });
        return server;
      },
    });
    handlers.push(h);
    const auth: AuthInfo = { token: 't0k3n', clientId: 'client-42', scopes: ['mcp'] };
    const app = express();
    const authenticate: RequestHandler = (req, _res, next) => {
      (req as typeof req & { auth?: AuthInfo }).auth = auth;
      next();
    };
    app.use('/mcp', authenticate, mcpExpress(h));
    const client = new Client({ name: 'auth', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${await listen(app)}/mcp`)));
    const result = await client.callTool({ name: 'whoami', arguments: {} });
    await client.close();
    expect((result.content as Array<{ text: string }>)[0]!.text).toBe('client-42');
    expect(seen).toEqual(auth);
  });

  it('rejects a request for a session with another principal (403)', async () => {
    const h = handler();
    let principal = 'alice';
    const app = express();
    app.use(
      '/mcp',
      (req, _res, next) => {
        (req as typeof req & { auth?: AuthInfo }).auth = { token: principal, clientId: principal, scopes: [] };
        next();
      },
      mcpExpress(h),
    );
    const init = await request(app).post('/mcp').set(HEADERS).send(INIT).buffer(true);
    const sessionId = init.headers['mcp-session-id'];
    expect(sessionId).toBeTruthy();
    principal = 'mallory';
    const res = await request(app)
      .post('/mcp')
      .set({ ...HEADERS, 'mcp-session-id': sessionId })
      .send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    expect(res.status).toBe(403);
    expect(res.body.error.message).toMatch(/another principal/);
  });

  it('answers 400 when another middleware consumed the body without parsing it (instead of hanging)', async () => {
    const app = express();
    app.use((req, _res, next) => {
      req.resume();
      req.on('end', () => next());
    });
    app.use('/mcp', mcpExpress(handler()));
    const res = await request(app).post('/mcp').set(HEADERS).send(INIT);
    expect(res.status).toBe(400);
    expect(res.body.error.message).toMatch(/already read by another middleware/);
  });

  it('passes the full URL to tool handlers as requestInfo.url', async () => {
    let seen: URL | undefined;
    const h = createMcpHandler({
      server: () => {
        const server = new McpServer({ name: 'url-test', version: '1' });
        server.registerTool('where', {}, async (extra) => {
          seen = extra.requestInfo?.url;
          return { content: [{ type: 'text', text: 'here' }] };
        });
        return server;
      },
    });
    handlers.push(h);
    const app = express();
    app.use('/api/mcp', mcpExpress(h));
    const client = new Client({ name: 'url', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${await listen(app)}/api/mcp?tenant=7`)));
    await client.callTool({ name: 'where', arguments: {} });
    await client.close();
    expect(seen?.pathname).toBe('/api/mcp');
    expect(seen?.searchParams.get('tenant')).toBe('7');
  });
});

describe('mcpFirst', () => {
  /** Listens with `mcpFirst(app, mcp, options)` as the server's request listener. */
  async function listenFirst(app: express.Express, mcp: McpHandler, options: Parameters<typeof mcpFirst>[2]): Promise<string> {
    const server = createServer(mcpFirst(app, mcp, options));
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  it('serves MCP at its path without Express, and hands every other request to the app', async () => {
    const seenByExpress: string[] = [];
    const app = express();
    app.use((req, _res, next) => {
      seenByExpress.push(`${req.method} ${req.url}`);
      next();
    });
    app.get('/health', (_req, res) => {
      res.json({ ok: true });
    });
    const origin = await listenFirst(app, handler(), { path: '/mcp/' });
    expect(await callSimpleText(`${origin}/mcp`)).toMatch(/test/i);
    expect(await callSimpleText(`${origin}/mcp/?tenant=a`)).toMatch(/test/i);
    expect(seenByExpress).toEqual([]);
    expect(await (await fetch(`${origin}/health`)).json()).toEqual({ ok: true });
    // Only the exact path is MCP's: a path below it and a longer name go to Express (its 404 here).
    expect((await fetch(`${origin}/mcp/other`, { method: 'POST' })).status).toBe(404);
    expect((await fetch(`${origin}/mcpx`)).status).toBe(404);
    expect(seenByExpress).toEqual(['GET /health', 'POST /mcp/other', 'GET /mcpx']);
  });

  it('answers bad MCP requests with a JSON-RPC 4xx, and gives tools the auth getAuthInfo found (async too)', async () => {
    const seen: Array<AuthInfo | undefined> = [];
    const mcp = handler({
      server: () => {
        const server = new McpServer({ name: 'auth', version: '1' });
        server.registerTool('whoami', {}, (extra) => {
          seen.push(extra.authInfo);
          return { content: [{ type: 'text', text: extra.authInfo?.clientId ?? 'anonymous' }] };
        });
        return server;
      },
    });
    const origin = await listenFirst(express(), mcp, {
      path: '/mcp',
      getAuthInfo: async (req) => {
        const token = req.headers.authorization?.replace(/^Bearer /, '');
        return token ? { token, clientId: `client-${token}`, scopes: [] } : undefined;
      },
    });
    const bad = await fetch(`${origin}/mcp`, { method: 'POST', headers: HEADERS, body: '{"jsonrpc":' });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ jsonrpc: '2.0', error: { code: -32700 } });
    const client = new Client({ name: 'express-test', version: '1' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${origin}/mcp`), { requestInit: { headers: { authorization: 'Bearer t1' } } }),
    );
    try {
      const result = await client.callTool({ name: 'whoami', arguments: {} });
      expect(result.content).toEqual([{ type: 'text', text: 'client-t1' }]);
    } finally {
      await client.close();
    }
    expect(seen.map((a) => a?.clientId)).toEqual(['client-t1']);
  });

  it('refuses a path that does not start with "/"', () => {
    expect(() => mcpFirst(express(), handler(), { path: 'mcp' })).toThrow(new TypeError('mcpFirst: path must start with "/", got "mcp"'));
  });
});
