/**
 * The 2026-07-28 era on raw bytes, beside the 2025 era on the same endpoint, against every adapter:
 * what a request of the revision gets, and what it is refused with.
 */
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { adapters, sharedStarts, type HarnessOptions, type ServerUnderTest } from '@mcp-kit/testbed/adapters';
import { envelope, MODERN, modernRequest, callTool, initializeRequest } from '@mcp-kit/testbed/requests';
import { modernAnswer, modernPost, errorOf, http, openSession } from '@mcp-kit/testbed/fetch-client';

const SERVER_INFO = 'io.modelcontextprotocol/serverInfo';

describe.each(adapters)('2026-07-28 era: $name', (adapter) => {
  let sut: ServerUnderTest;
  // No session, or one of each test's own: `next start` runs once per set of options (sharedStarts).
  const servers = sharedStarts(adapter);
  const start = async (options: HarnessOptions = {}) => {
    await sut?.close();
    sut = await servers.start(options);
  };
  beforeEach(() => start());
  afterAll(() => servers.closeAll());
  afterEach(async () => {
    await sut.close();
  });

  it('server/discover describes the server: the revision, its capabilities, cache hints and identity; no session', async () => {
    const res = await modernPost(sut.url, modernRequest('d-1', 'server/discover'));
    expect(res.status).toBe(200);
    expect(res.headers.get('mcp-session-id')).toBeNull();
    const { answer } = await modernAnswer(res);
    expect(answer).toMatchObject({
      jsonrpc: '2.0',
      id: 'd-1',
      result: {
        resultType: 'complete',
        supportedVersions: [MODERN],
        capabilities: { tools: { listChanged: true }, prompts: { listChanged: true }, resources: { subscribe: true } },
        ttlMs: 0,
        cacheScope: 'private',
        _meta: { [SERVER_INFO]: { name: expect.any(String), version: expect.any(String) } },
      },
    });
    expect(answer.result.capabilities).not.toHaveProperty('tasks');
  });

  it('tools/call is answered as one JSON body with resultType, the client id and the server identity', async () => {
    const res = await modernPost(sut.url, modernRequest(7, 'tools/call', { name: 'test_simple_text', arguments: {} }));
    const { status, json, answer } = await modernAnswer(res);
    expect({ status, json }).toEqual({ status: 200, json: true });
    expect(answer).toEqual({
      jsonrpc: '2.0',
      id: 7,
      result: {
        resultType: 'complete',
        content: [{ type: 'text', text: 'This is a simple text response for testing.' }],
        _meta: { [SERVER_INFO]: expect.objectContaining({ name: expect.any(String) }) },
      },
    });
    expect(res.headers.get('mcp-session-id')).toBeNull();
  });

  it('a tool that asks its client with a server request (SDK v1 sampling) hears at once that a 2026 request cannot carry it', async () => {
    const meta = envelope({ 'io.modelcontextprotocol/clientCapabilities': { sampling: {} } });
    const res = await modernPost(sut.url, modernRequest(8, 'tools/call', { name: 'test_sampling', arguments: { prompt: 'hi' } }, meta));
    const { answer } = await modernAnswer(res);
    expect(answer.id).toBe(8);
    // The in-process adapters serve the SDK v1 fixture, whose tool sends sampling/createMessage as
    // a request; next-example serves the SDK v2 one, which asks with input_required instead.
    if (adapter.inProcess) expect(JSON.stringify(answer)).toContain('cannot reach a client of the 2026-07-28 era');
    else
      expect(answer.result).toMatchObject({
        resultType: 'input_required',
        inputRequests: { completion: { method: 'sampling/createMessage' } },
      });
  });

  it('two clients using the same request id at once each get their own answer', async () => {
    const [a, b] = await Promise.all([
      modernPost(sut.url, modernRequest(1, 'tools/call', { name: 'long_task', arguments: { steps: 3, intervalMs: 20 } })),
      modernPost(sut.url, modernRequest(1, 'tools/call', { name: 'long_task', arguments: { steps: 5, intervalMs: 10 } })),
    ]);
    const [ra, rb] = [await modernAnswer(a), await modernAnswer(b)];
    expect(ra.answer).toMatchObject({ id: 1, result: { content: [{ text: 'completed 3 steps' }] } });
    expect(rb.answer).toMatchObject({ id: 1, result: { content: [{ text: 'completed 5 steps' }] } });
  });

  it('a long call streams its progress on its own response (no ids, no retry), and closeSSEStream leaves it open', async () => {
    const body = modernRequest(3, 'tools/call', {
      name: 'long_task',
      arguments: { steps: 6, intervalMs: 10, closeEvery: 2, retryMs: 50 },
      _meta: { progressToken: 'p-3' },
    });
    const { json, messages, answer, raw } = await modernAnswer(await modernPost(sut.url, body));
    expect(json).toBe(false);
    expect(raw).not.toMatch(/^(id|retry):/m);
    const progress = messages.filter((m) => m.method === 'notifications/progress').map((m) => m.params.progress);
    expect(progress).toEqual([1, 2, 3, 4, 5, 6]);
    // No envelope logLevel: the revision says no log notifications for this request.
    expect(messages.some((m) => m.method === 'notifications/message')).toBe(false);
    expect(answer).toMatchObject({ id: 3, result: { resultType: 'complete', content: [{ text: 'completed 6 steps' }] } });
  });

  it('log notifications go out at and above the level the envelope asks for', async () => {
    const body = modernRequest(
      4,
      'tools/call',
      { name: 'long_task', arguments: { steps: 3, intervalMs: 0 } },
      envelope({ 'io.modelcontextprotocol/logLevel': 'info' }),
    );
    const { messages } = await modernAnswer(await modernPost(sut.url, body));
    const steps = messages.filter((m) => m.method === 'notifications/message').map((m) => m.params.data.step);
    expect(steps).toEqual([1, 2, 3]);
    const quiet = modernRequest(
      5,
      'tools/call',
      { name: 'long_task', arguments: { steps: 3, intervalMs: 0 } },
      envelope({ 'io.modelcontextprotocol/logLevel': 'error' }),
    );
    expect((await modernAnswer(await modernPost(sut.url, quiet))).json).toBe(true);
  });

  it('refuses a malformed envelope with -32602, headers that disagree with the body with -32020, another version with -32022: 400, the id echoed', async () => {
    const noCaps = modernRequest(11, 'tools/list', {}, envelope({ 'io.modelcontextprotocol/clientCapabilities': undefined }));
    let e = await errorOf(await modernPost(sut.url, noCaps));
    expect([e.status, e.code, e.body.id]).toEqual([400, -32602, 11]);

    const list = modernRequest(12, 'tools/list');
    e = await errorOf(await modernPost(sut.url, list, { 'mcp-method': 'tools/call' }));
    expect([e.status, e.code, e.body.id]).toEqual([400, -32020, 12]);
    e = await errorOf(await modernPost(sut.url, list, { 'mcp-method': undefined }));
    expect([e.status, e.code]).toEqual([400, -32020]);
    e = await errorOf(await modernPost(sut.url, list, { 'mcp-protocol-version': undefined }));
    expect([e.status, e.code]).toEqual([400, -32020]);

    const call = modernRequest(13, 'tools/call', { name: 'test_simple_text', arguments: {} });
    e = await errorOf(await modernPost(sut.url, call, { 'mcp-name': 'test_error_handling' }));
    expect([e.status, e.code, e.body.id]).toEqual([400, -32020, 13]);
    e = await errorOf(await modernPost(sut.url, call, { 'mcp-name': undefined }));
    expect([e.status, e.code]).toEqual([400, -32020]);
    // A name that is not header-safe travels base64-encoded (SEP-2243) and is decoded before comparing.
    const encoded = `=?base64?${Buffer.from('test_simple_text').toString('base64')}?=`;
    expect((await modernPost(sut.url, call, { 'mcp-name': encoded })).status).toBe(200);

    const future = modernRequest(14, 'tools/list', {}, envelope({ 'io.modelcontextprotocol/protocolVersion': 'v999.0.0' }));
    e = await errorOf(await modernPost(sut.url, future, { 'mcp-protocol-version': 'v999.0.0' }));
    expect([e.status, e.code, e.body.id]).toEqual([400, -32022, 14]);
    expect(e.body.error.data).toEqual({ supported: [MODERN], requested: 'v999.0.0' });
    e = await errorOf(await modernPost(sut.url, future));
    expect([e.status, e.code]).toEqual([400, -32020]);
  });

  it('the methods the revision removed are not found (404, -32601), and unknown ones neither', async () => {
    for (const [i, method] of [
      'initialize',
      'ping',
      'logging/setLevel',
      'resources/subscribe',
      'resources/unsubscribe',
      'unknown/method',
    ].entries()) {
      const params = method.startsWith('resources/')
        ? { uri: 'test://watched-resource' }
        : method === 'logging/setLevel'
          ? { level: 'info' }
          : {};
      const e = await errorOf(await modernPost(sut.url, modernRequest(20 + i, method, params)));
      expect([method, e.status, e.code, e.body.id]).toEqual([method, 404, -32601, 20 + i]);
    }
  });

  it('a session header on a 2026 request is ignored: no session is created or used, whatever the request', async () => {
    const api = http(sut.url);
    const { headers } = await openSession(api);
    const res = await modernPost(sut.url, modernRequest(30, 'tools/call', { name: 'test_simple_text', arguments: {} }), {
      'mcp-session-id': headers['mcp-session-id'],
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('mcp-session-id')).toBeNull();
    for (const body of [
      modernRequest(31, 'initialize'),
      modernRequest(32, 'tools/list', {}, envelope({ 'io.modelcontextprotocol/protocolVersion': '2099-01-01' })),
    ]) {
      const refused = await modernPost(sut.url, body);
      expect(refused.status).toBeGreaterThanOrEqual(400);
      expect(refused.headers.get('mcp-session-id')).toBeNull();
    }
    if (sut.inProcess) expect(sut.inProcess.handler.sessionCount).toBe(1);
  });

  it('both eras at once on one endpoint: a 2025 session polls with SEP-1699 while 2026 calls are answered beside it', async () => {
    const api = http(sut.url);
    const { headers } = await openSession(api);
    const legacy = await api.postSse(callTool(2, 'long_task', { steps: 4, intervalMs: 20, closeEvery: 2, retryMs: 30 }), headers);
    const modern = await Promise.all(
      [40, 41, 42].map(
        async (id) =>
          (await modernAnswer(await modernPost(sut.url, modernRequest(id, 'tools/call', { name: 'test_simple_text', arguments: {} }))))
            .answer,
      ),
    );
    expect(modern.map((m) => m.id)).toEqual([40, 41, 42]);
    await legacy.ended_();
    // The 2025 client got its priming event and a server close with the tool's retry: it polls.
    expect(legacy.blocks[0]!.raw).toMatch(/^id: \S+\.0\nretry: 500\ndata: $/);
    expect(legacy.raw.endsWith('retry: 30\n\n')).toBe(true);
  });

  it("eras: ['modern'] refuses initialize with -32022 naming the 2026 revision, and GET with 405", async () => {
    await start({ eras: ['modern'] });
    const api = http(sut.url);
    const e = await errorOf(await api.post(initializeRequest()));
    expect([e.status, e.code]).toEqual([400, -32022]);
    expect(e.body.error.data).toEqual({ supported: [MODERN], requested: '2025-11-25' });
    expect((await api.get()).status).toBe(405);
    expect((await modernPost(sut.url, modernRequest(1, 'tools/list'))).status).toBe(200);
  });

  it("eras: ['legacy'] refuses a 2026 request with -32022 naming the 2025 versions, so a client falls back", async () => {
    await start({ eras: ['legacy'] });
    const e = await errorOf(await modernPost(sut.url, modernRequest(1, 'server/discover')));
    expect([e.status, e.code]).toEqual([400, -32022]);
    expect(e.body.error.data.supported).toContain('2025-11-25');
    expect(e.body.error.data.supported).not.toContain(MODERN);
    await openSession(http(sut.url));
  });
});
