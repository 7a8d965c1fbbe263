import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createMcpHandler, type McpHandler } from '@mcp-kit/core';
import { createFixtureServer } from '@mcp-kit/fixtures';
import { getOrCreate, mcpNext, type McpNextOptions, type McpRouteHandlers } from '@mcp-kit/next';
import { callTool, initializeRequest, LEGACY } from '@mcp-kit/testbed/requests';
import { messagesOf, readSse, sseBlocks } from '@mcp-kit/testbed/sse';

const URL_ = 'http://127.0.0.1:3000/mcp';
const BASE_HEADERS = {
  // Next's Request carries the client's Host; a hand-built Request has none.
  host: '127.0.0.1:3000',
  accept: 'application/json, text/event-stream',
  'content-type': 'application/json',
  'mcp-protocol-version': LEGACY,
};
const INIT = initializeRequest(0);
// What Next.js passes as a route handler's second argument.
const NEXT_CONTEXT = { params: Promise.resolve({}) };

let handlers: McpHandler[] = [];
afterEach(async () => {
  await Promise.all(handlers.map((h) => h.close()));
  handlers = [];
});

/** The fixture plus two probes: `whoami` echoes authInfo, `wait_abort` logs once and waits for its signal. */
function setup(options: { stateless?: boolean; next?: McpNextOptions } = {}) {
  let aborted!: () => void;
  const toolAborted = new Promise<void>((resolve) => (aborted = resolve));
  const mcp = createMcpHandler({
    stateless: options.stateless ?? false,
    dnsRebindingProtection: true,
    server: () => {
      const server = createFixtureServer();
      server.registerTool('whoami', { inputSchema: {} }, async (_args, extra) => ({
        content: [{ type: 'text', text: JSON.stringify(extra.authInfo ?? null) }],
      }));
      server.registerTool('wait_abort', { inputSchema: { tag: z.string().optional() } }, async (_args, extra) => {
        await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data: 'started' } });
        // The abort may already have happened while the notification was being sent.
        if (!extra.signal.aborted) await new Promise((resolve) => extra.signal.addEventListener('abort', resolve, { once: true }));
        aborted();
        return { content: [{ type: 'text', text: 'aborted' }] };
      });
      return server;
    },
  });
  handlers.push(mcp);
  return { route: mcpNext(mcp, options.next), toolAborted };
}

function post(route: McpRouteHandlers, body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal) {
  const init: RequestInit = { method: 'POST', headers: { ...BASE_HEADERS, ...headers }, body: JSON.stringify(body) };
  if (signal) init.signal = signal;
  return route.POST(new Request(URL_, init));
}

async function initialize(route: McpRouteHandlers, headers: Record<string, string> = {}): Promise<string> {
  const res = await post(route, INIT, headers);
  expect(res.status).toBe(200);
  await readSse(res.body!);
  const sessionId = res.headers.get('mcp-session-id')!;
  const ack = await post(route, { jsonrpc: '2.0', method: 'notifications/initialized' }, { ...headers, 'mcp-session-id': sessionId });
  expect(ack.status).toBe(202);
  return sessionId;
}

describe('mcpNext', () => {
  it('initializes a session over SSE, starting with a priming event', async () => {
    const { route } = setup();
    const res = await route.POST(
      new Request(URL_, { method: 'POST', headers: BASE_HEADERS, body: JSON.stringify(INIT) }),
      // @ts-expect-error Next passes a context; the adapter must ignore it
      NEXT_CONTEXT,
    );
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    expect(res.headers.get('mcp-session-id')).toMatch(/\S{16,}/);
    const events = await readSse(res.body!);
    expect(events[0]!.raw).toMatch(/^id: \S+\nretry: 1000\ndata: $/);
    expect(messagesOf(events)).toEqual([
      expect.objectContaining({ id: 0, result: expect.objectContaining({ protocolVersion: '2025-11-25' }) }),
    ]);
  });

  it('answers a tools/call over SSE, and resumes a closed stream with GET + Last-Event-ID', async () => {
    const { route } = setup();
    const sessionId = await initialize(route);
    const session = { 'mcp-session-id': sessionId };

    const first = await readSse(
      (await post(route, callTool(1, 'long_task', { steps: 5, intervalMs: 0, closeEvery: 2, retryMs: 500 }), session)).body!,
    );
    expect(messagesOf(first).map((m) => m.params?.data?.step)).toEqual([1, 2]);
    expect(first.at(-1)!.raw).toBe('retry: 500');

    const seen = [...messagesOf(first)];
    let last = first.filter((e) => e.id).at(-1)!.id!;
    while (!seen.some((m) => m.id === 1)) {
      const res = await route.GET(new Request(URL_, { headers: { ...BASE_HEADERS, ...session, 'last-event-id': last } }));
      expect(res.status).toBe(200);
      const events = await readSse(res.body!);
      seen.push(...messagesOf(events));
      last = events.filter((e) => e.id).at(-1)!.id!;
    }
    expect(seen.filter((m) => m.method).map((m) => m.params.data.step)).toEqual([1, 2, 3, 4, 5]);
    expect(seen.at(-1)).toMatchObject({ id: 1, result: { content: [{ type: 'text', text: 'completed 5 steps' }] } });

    const del = await route.DELETE(new Request(URL_, { method: 'DELETE', headers: { ...BASE_HEADERS, ...session } }));
    expect(del.status).toBe(200);
  });

  it("passes getAuthInfo's result to tools as extra.authInfo", async () => {
    const { route } = setup({
      next: {
        getAuthInfo: async (req) => {
          const token = req.headers.get('authorization')?.replace(/^Bearer /i, '');
          return token ? { token, clientId: 'client-1', scopes: ['mcp'], extra: { sub: 'user-7' } } : undefined;
        },
      },
    });
    const auth = { authorization: 'Bearer t0k3n' };
    const sessionId = await initialize(route, auth);
    const res = await post(route, callTool(1, 'whoami'), { ...auth, 'mcp-session-id': sessionId });
    const [result] = messagesOf(await readSse(res.body!));
    expect(JSON.parse(result!.result.content[0].text)).toEqual({
      token: 't0k3n',
      clientId: 'client-1',
      scopes: ['mcp'],
      extra: { sub: 'user-7' },
    });
  });

  it('answers bad requests with a 4xx JSON-RPC error body', async () => {
    const { route } = setup();
    const wrongType = await post(route, INIT, { 'content-type': 'text/plain' });
    expect(wrongType.status).toBe(415);
    expect(wrongType.headers.get('content-type')).toBe('application/json');
    const wrongTypeBody = await wrongType.json();
    expect(wrongTypeBody).toMatchObject({ jsonrpc: '2.0', error: { code: -32000, message: expect.stringContaining('Content-Type') } });
    expect(wrongTypeBody).not.toHaveProperty('id');

    const unknown = await post(route, callTool(1, 'whoami'), { 'mcp-session-id': 'nope' });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ error: { code: -32001 } });

    const rebinding = await post(route, INIT, { origin: 'http://evil.example' });
    expect(rebinding.status).toBe(403);
  });

  it('stops the work when the client aborts the request (request.signal)', async () => {
    const { route, toolAborted } = setup({ stateless: true });
    const client = new AbortController();
    const res = await post(route, callTool(1, 'wait_abort'), {}, client.signal);
    const events = sseBlocks(res.body!);
    expect((await events.next()).value?.data).toContain('started');
    client.abort();
    await toolAborted;
  });

  it('ends the stream at once when the client left before it opened', async () => {
    const { route } = setup({ stateless: true });
    const client = new AbortController();
    const pending = post(route, callTool(1, 'wait_abort'), {}, client.signal);
    // The handler is still reading the body: the abort comes before the SSE response exists.
    client.abort();
    const res = await pending;
    expect(await readSse(res.body!)).toEqual([]);
  });

  it('stops the work when the response body is cancelled (Next does this when the socket closes)', async () => {
    const { route, toolAborted } = setup({ stateless: true });
    const res = await post(route, callTool(1, 'wait_abort'));
    const reader = res.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain('started');
    await reader.cancel();
    await toolAborted;
  });
});

describe('getOrCreate', () => {
  it('creates once per name and process, surviving a module re-evaluation', () => {
    let created = 0;
    const a = getOrCreate('test-cache', () => ({ n: ++created }));
    const b = getOrCreate('test-cache', () => ({ n: ++created }));
    expect(b).toBe(a);
    expect(created).toBe(1);
    expect(getOrCreate('test-cache-other', () => ({ n: ++created }))).not.toBe(a);
  });
});
