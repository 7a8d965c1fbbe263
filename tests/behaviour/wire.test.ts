/**
 * Wire-level behaviour of Streamable HTTP + SEP-1699, on raw bytes, run against every adapter.
 */
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MemoryEventStore, type EventStore } from '@mcp-kit/core';
import { adapters, inProcessAdapters, sharedStarts, type HarnessOptions, type ServerUnderTest } from '@mcp-kit/testbed/adapters';
import { callTool, initializeRequest, LEGACY } from '@mcp-kit/testbed/requests';
import { errorOf, http, openSession, rawRequest, type McpHttp } from '@mcp-kit/testbed/fetch-client';
import type { SseBlock } from '@mcp-kit/testbed/sse';

const TOKEN = /^[A-Za-z0-9_-]{22}$/;
const seqOf = (id: string | undefined) => Number(id!.split('.')[1]);
const tokenOf = (id: string | undefined) => id!.split('.')[0];

describe.each(adapters)('wire: $name', (adapter) => {
  let sut: ServerUnderTest | undefined;
  let starting: Promise<void> | undefined;
  // Each test opens sessions of its own: `next start` runs once per set of options (sharedStarts).
  const servers = sharedStarts(adapter);
  const start = async (options: HarnessOptions = {}) => {
    await sut?.close();
    sut = await servers.start(options);
  };
  afterAll(() => servers.closeAll());
  // The server with the default options starts at a test's first request, so a test that starts
  // its own (`await start({ … })`) does not pay for two.
  const api: McpHttp = {
    get url() {
      return sut!.url;
    },
    post: async (...args) => (await started()).post(...args),
    postSse: async (...args) => (await started()).postSse(...args),
    get: async (...args) => (await started()).get(...args),
    getSse: async (...args) => (await started()).getSse(...args),
    del: async (...args) => (await started()).del(...args),
  };
  const started = async (): Promise<McpHttp> => {
    if (!sut) await (starting ??= start());
    return http(sut!.url);
  };
  beforeEach(() => {
    starting = undefined;
  });
  afterEach(async () => {
    await sut?.close();
    sut = undefined;
  });

  it('initialize streams a priming event (id, retry, empty data) before the response', async () => {
    const stream = await api.postSse(initializeRequest());
    expect(stream.response.status).toBe(200);
    expect(stream.response.headers.get('mcp-session-id')).toMatch(TOKEN);
    const priming = await stream.next();
    expect(priming.raw).toMatch(/^id: [A-Za-z0-9_-]{22}\.0\nretry: 500\ndata: $/);
    const response = await stream.next();
    expect(tokenOf(response.id)).toBe(tokenOf(priming.id));
    expect(seqOf(response.id)).toBe(1);
    expect(JSON.parse(response.data!)).toMatchObject({ id: 1, result: { protocolVersion: LEGACY } });
    await stream.ended_();
  });

  it('closeSSEStream(retryMs) writes its retry right before the close; GET + Last-Event-ID replays the rest and ends after the result', async () => {
    const { headers } = await openSession(api);
    const post = await api.postSse(callTool(2, 'long_task', { steps: 6, intervalMs: 20, closeEvery: 2, retryMs: 777 }), headers);
    const priming = await post.next();
    expect(priming.data).toBe('');
    expect(priming.retry).toBe(500);
    await post.ended_();
    const first = post.blocks.slice(1);
    expect(first.map((b) => (b.data ? JSON.parse(b.data).params.data.step : `retry:${b.retry}`))).toEqual([1, 2, 'retry:777']);
    expect(post.raw.endsWith('retry: 777\n\n')).toBe(true);

    // Resume until the result: each resumed stream starts with the cursor it was given.
    const received: SseBlock[] = first.filter((b) => b.data);
    let cursor = received.at(-1)!.id!;
    let result: any;
    for (let round = 0; round < 5 && !result; round++) {
      const resumed = await api.getSse({ ...headers, 'last-event-id': cursor });
      expect(await resumed.next()).toMatchObject({ id: cursor, data: '' });
      await resumed.ended_();
      const events = resumed.blocks.slice(1).filter((b) => b.data);
      received.push(...events);
      if (events.length) cursor = events.at(-1)!.id!;
      result = events.map((b) => JSON.parse(b.data!)).find((m) => m.id === 2);
      // A resumed stream ends right after the result, or with the tool's next retry.
      const tail = resumed.blocks.at(-1)!;
      expect(result ? tail.data && JSON.parse(tail.data).id === 2 : tail.retry === 777).toBe(true);
    }
    expect(result.result.content[0].text).toBe('completed 6 steps');
    const steps = received
      .map((b) => JSON.parse(b.data!))
      .filter((m) => m.method)
      .map((m) => m.params.data.step);
    expect(steps).toEqual([1, 2, 3, 4, 5, 6]);
    expect(received.map((b) => seqOf(b.id))).toEqual([1, 2, 3, 4, 5, 6, 7]);
  });

  it("a resumed stream's priming event repeats the retry of the stream's last close, so the pace sticks", async () => {
    const { headers } = await openSession(api);
    const post = await api.postSse(callTool(2, 'long_task', { steps: 4, intervalMs: 200, closeEvery: 2, retryMs: 777 }), headers);
    await post.ended_();
    const cursor = post.blocks.filter((b) => b.data).at(-1)!.id!;
    const resumed = await api.getSse({ ...headers, 'last-event-id': cursor });
    expect(await resumed.next()).toMatchObject({ id: cursor, retry: 777, data: '' });
    await resumed.until((m) => m.id === 2);
    await resumed.ended_();
  });

  it('replays exactly the frames after a given id, byte for byte, and ends a completed stream at once', async () => {
    const { headers } = await openSession(api);
    const post = await api.postSse(callTool(2, 'long_task', { steps: 5, intervalMs: 0 }), headers);
    await post.ended_();
    const frames = post.blocks.filter((b) => b.data);
    expect(frames).toHaveLength(6);
    const resumed = await api.getSse({ ...headers, 'last-event-id': frames[1]!.id! });
    await resumed.ended_();
    const replayed = resumed.blocks.slice(1);
    expect(replayed.map((b) => b.raw)).toEqual(frames.slice(2).map((b) => b.raw));
  });

  it('a Last-Event-ID of another session replays nothing: 404 with a JSON-RPC error', async () => {
    const a = await openSession(api);
    const b = await openSession(api);
    const post = await api.postSse(callTool(2, 'test_simple_text'), a.headers);
    await post.ended_();
    const secret = post.blocks.at(-1)!;
    const cursor = post.blocks[0]!.id!;
    const res = await api.get({ ...b.headers, 'last-event-id': cursor });
    const err = await errorOf(res);
    expect(err.status).toBe(404);
    expect(err.message).toMatch(/Last-Event-ID/);
    expect(JSON.stringify(err.body)).not.toContain(JSON.parse(secret.data!).result.content[0].text);
  });

  it('unknown and malformed Last-Event-IDs get clear 4xx errors', async () => {
    const { headers } = await openSession(api);
    const unknown = await errorOf(await api.get({ ...headers, 'last-event-id': 'AAAAAAAAAAAAAAAAAAAAAA.1' }));
    expect(unknown).toMatchObject({ status: 404, code: -32000 });
    const malformed = await errorOf(await api.get({ ...headers, 'last-event-id': 'not-an-id' }));
    expect(malformed.status).toBe(400);
    expect(malformed.message).toMatch(/malformed Last-Event-ID/);
  });

  it('an evicted cursor gets 410, never a partial replay', async () => {
    await start({ eventStore: { maxEventsPerStream: 3 } });
    const { headers } = await openSession(api);
    const post = await api.postSse(callTool(2, 'long_task', { steps: 8, intervalMs: 0 }), headers);
    await post.ended_();
    const first = post.blocks.find((b) => b.data)!;
    const err = await errorOf(await api.get({ ...headers, 'last-event-id': first.id! }));
    expect(err.status).toBe(410);
    expect(err.message).toMatch(/evicted/);
  });

  it('holds two resumed streams of one session at once, each with its own events', async () => {
    const { headers } = await openSession(api);
    const args = { steps: 6, intervalMs: 40, closeEvery: 3, retryMs: 100 };
    const [a, b] = await Promise.all([
      api.postSse(callTool(10, 'long_task', args), headers),
      api.postSse(callTool(20, 'long_task', args), headers),
    ]);
    await Promise.all([a.ended_(), b.ended_()]);
    const lastA = a.blocks.filter((x) => x.data).at(-1)!.id!;
    const lastB = b.blocks.filter((x) => x.data).at(-1)!.id!;
    expect(tokenOf(lastA)).not.toBe(tokenOf(lastB));
    const [ra, rb] = await Promise.all([
      api.getSse({ ...headers, 'last-event-id': lastA }),
      api.getSse({ ...headers, 'last-event-id': lastB }),
    ]);
    await Promise.all([ra.ended_(), rb.ended_()]);
    for (const [stream, last, id] of [
      [ra, lastA, 10],
      [rb, lastB, 20],
    ] as const) {
      const events = stream.blocks.slice(1).filter((x) => x.data);
      expect(events.every((e) => tokenOf(e.id) === tokenOf(last))).toBe(true);
      const messages = events.map((e) => JSON.parse(e.data!));
      expect(messages.filter((m) => m.method).map((m) => m.params.data.step)).toEqual([4, 5, 6]);
      expect(messages.at(-1)).toMatchObject({ id, result: { content: [{ text: 'completed 6 steps' }] } });
    }
  });

  it('a new connection for a stream replaces the stale one instead of 409', async () => {
    const { headers } = await openSession(api);
    const post = await api.postSse(callTool(2, 'long_task', { steps: 40, intervalMs: 40, closeEvery: 2, retryMs: 100 }), headers);
    await post.ended_();
    const cursor = post.blocks.filter((b) => b.id).at(-1)!.id!;
    const first = await api.getSse({ ...headers, 'last-event-id': cursor });
    await first.next();
    const second = await api.getSse({ ...headers, 'last-event-id': cursor });
    expect(second.response.status).toBe(200);
    await first.ended_();
    await second.next();
    const next = await second.next();
    expect(seqOf(next.id)).toBe(seqOf(cursor) + 1);
    second.abort();
  });

  it('the standalone GET stream starts with a priming event; a second GET replaces the first', async () => {
    const { headers } = await openSession(api);
    const one = await api.getSse(headers);
    const p1 = await one.next();
    expect(p1.raw).toMatch(/^id: [A-Za-z0-9_-]{22}\.0\nretry: 500\ndata: $/);
    const two = await api.getSse(headers);
    const p2 = await two.next();
    expect(tokenOf(p2.id)).toBe(tokenOf(p1.id));
    await one.ended_();
    expect(two.ended).toBe(false);
    two.abort();
  });

  it('sends keep-alive comments on idle streams', async () => {
    await start({ keepAliveMs: 100 });
    const { headers } = await openSession(api);
    const get = await api.getSse(headers);
    await get.next();
    const ka = await get.next(2_000);
    expect(ka.raw).toBe(': keep-alive');
    get.abort();
  });

  it('DELETE ends the session and its open streams; the id is then unknown (404)', async () => {
    const { headers } = await openSession(api);
    const get = await api.getSse(headers);
    await get.next();
    const del = await api.del(headers);
    expect(del.status).toBe(200);
    await get.ended_();
    const after = await errorOf(await api.post(callTool(3, 'test_simple_text'), headers));
    expect(after).toMatchObject({ status: 404, code: -32001 });
    expect((await errorOf(await api.del(headers))).status).toBe(404);
  });

  it('rejects bad requests with the right status and a JSON-RPC error body, and keeps serving', async () => {
    const { headers } = await openSession(api);
    const cases: Array<[string, () => Promise<Response>, number, number, RegExp]> = [
      ['PUT', () => fetch(api.url, { method: 'PUT' }), 405, -32000, /Method not allowed/],
      ['PATCH', () => fetch(api.url, { method: 'PATCH', body: '{}' }), 405, -32000, /Method not allowed/],
      [
        'POST without SSE in Accept',
        () => api.post(callTool(3, 'test_simple_text'), { ...headers, accept: 'application/json' }),
        406,
        -32000,
        /Not Acceptable/,
      ],
      ['GET without SSE in Accept', () => api.get({ ...headers, accept: 'application/json' }), 406, -32000, /Not Acceptable/],
      ['text/plain body', () => api.post('{}', { ...headers, 'content-type': 'text/plain' }), 415, -32000, /Content-Type/],
      ['malformed JSON', () => api.post('{"jsonrpc": "2.0", "id": 1,', headers), 400, -32700, /Parse error/],
      ['not JSON-RPC', () => api.post({ hello: 'world' }, headers), 400, -32600, /jsonrpc/],
      ['missing session', () => api.post(callTool(3, 'test_simple_text')), 400, -32000, /Mcp-Session-Id header is required/],
      [
        'unknown session',
        () => api.post(callTool(3, 'test_simple_text'), { ...headers, 'mcp-session-id': 'nope' }),
        404,
        -32001,
        /Session not found/,
      ],
      ['GET without session', () => api.get(), 400, -32000, /Mcp-Session-Id/],
      [
        'unsupported protocol version',
        () => api.post(callTool(3, 'test_simple_text'), { ...headers, 'mcp-protocol-version': '1999-01-01' }),
        400,
        -32000,
        /Unsupported MCP-Protocol-Version/,
      ],
      [
        'batch on 2025-11-25',
        () => api.post([callTool(3, 'test_simple_text'), callTool(4, 'test_simple_text')], headers),
        400,
        -32600,
        /batches/,
      ],
      ['initialize with a session id', () => api.post(initializeRequest(9), headers), 400, -32600, /initialize/],
      [
        'foreign Host (DNS rebinding)',
        () =>
          rawRequest(api.url, {
            method: 'POST',
            headers: { host: 'evil.example', 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
            body: JSON.stringify(initializeRequest(9)),
          }),
        403,
        -32000,
        /Host/,
      ],
      ['foreign Origin (DNS rebinding)', () => api.post(initializeRequest(9), { origin: 'http://evil.example' }), 403, -32000, /Origin/],
    ];
    for (const [name, send, status, code, message] of cases) {
      const res = await send();
      if (!(res.headers.get('content-type') ?? '').includes('json'))
        throw new Error(`${name}: ${res.status} ${res.headers.get('content-type')}`);
      const err = await errorOf(res);
      expect({ name, status: err.status, code: err.code }).toEqual({ name, status, code });
      expect(err.message, name).toMatch(message);
    }
    const ok = await api.postSse(callTool(5, 'test_simple_text'), headers);
    const done = await ok.until((m) => m.id === 5);
    expect(JSON.parse(done.at(-1)!.data!).result.content[0].type).toBe('text');
  });

  it('refuses bodies over maxBodyBytes with 413', async () => {
    await start({ maxBodyBytes: 1024 });
    const { headers } = await openSession(api);
    const err = await errorOf(await api.post(callTool(3, 'test_simple_text', { pad: 'x'.repeat(4096) }), headers));
    expect(err).toMatchObject({ status: 413, code: -32600 });
  });

  it('at the session cap an initialize lets go of the least recently used idle session; 503 and Retry-After only when every session is busy', async () => {
    await start({ maxSessions: 2 });
    const a = await openSession(api);
    const b = await openSession(api);
    // A is used again: B becomes the least recently used.
    await (await api.postSse(callTool(3, 'test_simple_text'), a.headers)).until((m) => m.id === 3);
    const c = await openSession(api);
    const gone = await errorOf(await api.post(callTool(4, 'test_simple_text'), b.headers));
    expect([gone.status, gone.code]).toEqual([404, -32001]);
    await (await api.postSse(callTool(5, 'test_simple_text'), a.headers)).until((m) => m.id === 5);

    // Both sessions busy (a call running on each): nothing may be let go.
    const busy = [a, c].map((s, i) => api.postSse(callTool(10 + i, 'long_task', { steps: 3, intervalMs: 150 }), s.headers));
    const streams = await Promise.all(busy);
    await Promise.all(streams.map((st) => st.next()));
    const res = await api.post(initializeRequest(1));
    expect(res.headers.get('retry-after')).toBe('5');
    const refused = await errorOf(res);
    expect([refused.status, refused.code]).toEqual([503, -32000]);
    for (const [i, st] of streams.entries()) await st.until((m) => m.id === 10 + i);
  });

  it('accepts batches from a 2025-03-26 client and answers both on one stream', async () => {
    const { headers } = await openSession(api, '2025-03-26');
    const stream = await api.postSse([callTool(3, 'test_simple_text'), callTool(4, 'test_simple_text')], headers);
    await stream.ended_();
    const ids = stream.blocks
      .filter((b) => b.data)
      .map((b) => JSON.parse(b.data!).id)
      .sort();
    expect(ids).toEqual([3, 4]);
  });

  it('clients before 2025-11-25 get no priming event, and closeSSEStream leaves their stream open', async () => {
    const { headers } = await openSession(api, '2025-06-18');
    const stream = await api.postSse(callTool(2, 'long_task', { steps: 4, intervalMs: 0, closeEvery: 1 }), headers);
    await stream.ended_();
    const blocks = stream.blocks;
    expect(blocks.every((b) => b.data !== '')).toBe(true);
    expect(blocks.some((b) => b.retry !== undefined)).toBe(false);
    expect(JSON.parse(blocks.at(-1)!.data!).result.content[0].text).toBe('completed 4 steps');
  });

  it('answers with one JSON body in jsonResponse mode', async () => {
    await start({ jsonResponse: true });
    const init = await api.post(initializeRequest());
    expect(init.headers.get('content-type')).toMatch(/^application\/json/);
    const sessionId = init.headers.get('mcp-session-id')!;
    expect((await init.json()).result.protocolVersion).toBe(LEGACY);
    const res = await api.post(callTool(2, 'test_simple_text'), { 'mcp-session-id': sessionId });
    expect((await res.json()).id).toBe(2);
  });

  it('jsonResponse: a cancelled call ends its POST with 202 and no body, and its id is free again', async () => {
    await start({ jsonResponse: true });
    const init = await api.post(initializeRequest());
    const headers = { 'mcp-session-id': init.headers.get('mcp-session-id')! };
    await init.text();
    expect((await api.post({ jsonrpc: '2.0', method: 'notifications/initialized' }, headers)).status).toBe(202);
    let settled: Response | undefined;
    const call = api.post(callTool(2, 'long_task', { steps: 500, intervalMs: 20 }), headers).then((res) => (settled = res));
    const cancel = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 2, reason: 'test' } };
    // The cancel may overtake the call's dispatch (then the SDK ignores it): repeat it until the POST ends.
    for (let i = 0; i < 100 && settled === undefined; i++) {
      expect((await api.post(cancel, headers)).status).toBe(202);
      await Promise.race([call, new Promise((r) => setTimeout(r, 50))]);
    }
    expect(settled?.status).toBe(202);
    expect(await settled!.text()).toBe('');
    const again = await api.post(callTool(2, 'test_simple_text'), headers);
    expect((await again.json()).id).toBe(2);
  });

  it('serves without sessions in stateless mode; GET is 405', async () => {
    await start({ stateless: true });
    const stream = await api.postSse(initializeRequest());
    expect(stream.response.headers.get('mcp-session-id')).toBeNull();
    await stream.until((m) => m.id === 1);
    const call = await api.postSse(callTool(2, 'test_simple_text'));
    await call.until((m) => m.id === 2);
    expect(call.blocks[0]!.id).toBeUndefined();
    expect((await errorOf(await api.get())).status).toBe(405);
  });
});

// Options that hold functions, or need the client's address, run in-process only (not in `next start`).
describe.each(inProcessAdapters)('wire (in-process options): $name', (adapter) => {
  let sut: ServerUnderTest;
  let api: McpHttp;
  const start = async (options: HarnessOptions = {}) => {
    sut = await adapter.start(options);
    api = http(sut.url);
  };
  afterEach(async () => {
    await sut.close();
  });

  it.each(['pollPre20251125Clients', 'legacyPolling'] as const)(
    '%s: a client before 2025-11-25 gets a priming event, and closeSSEStream ends its stream before the answer',
    async (option) => {
      await start({ [option]: true });
      const { headers } = await openSession(api, '2025-06-18');
      const stream = await api.postSse(callTool(2, 'long_task', { steps: 4, intervalMs: 0, closeEvery: 1 }), headers);
      await stream.ended_();
      expect(stream.blocks[0]).toMatchObject({ data: '', retry: 500 });
      expect(stream.blocks.some((b) => b.data?.includes('completed 4 steps'))).toBe(false);
    },
  );

  it('answers 503 when the event store fails, reports it through onError, and keeps serving', async () => {
    const memory = new MemoryEventStore();
    let broken = false;
    const store: EventStore = {
      createStream: (key) => {
        if (broken) throw new Error('store down');
        return memory.createStream(key);
      },
      append: (...args) => memory.append(...args),
      replayAfter: (...args) => memory.replayAfter(...args),
      deleteSession: (id) => memory.deleteSession(id),
    };
    await start({ eventStore: store });
    const { headers } = await openSession(api);
    broken = true;
    const res = await api.post(callTool(2, 'test_simple_text'), headers);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(await errorOf(res)).toMatchObject({ status: 503, code: -32000 });
    expect(sut.errors.map((e) => e.message)).toEqual(['event store createStream failed: store down']);
    broken = false;
    sut.errors.length = 0;
    // The failed request left nothing behind: the same id can be used again.
    const ok = await api.postSse(callTool(2, 'test_simple_text'), headers);
    await ok.until((m) => m.id === 2);
  });

  it.each(['POST', 'GET'])(
    'a %s whose stream the store is still creating when DELETE ends the session gets 404, not an orphan stream',
    async (verb) => {
      let hold: (() => void) | undefined;
      class SlowCreate extends MemoryEventStore {
        override createStream(...args: Parameters<MemoryEventStore['createStream']>) {
          if (!hold) return super.createStream(...args);
          return new Promise<void>((resolve) => {
            const release = hold!;
            hold = () => {
              release();
              resolve(super.createStream(...args));
            };
            release();
          });
        }
      }
      await start({ eventStore: new SlowCreate() });
      const { headers } = await openSession(api);
      const waiting = new Promise<void>((resolve) => (hold = resolve));
      const racing = verb === 'POST' ? api.post(callTool(2, 'long_task', { steps: 100, intervalMs: 20 }), headers) : api.get(headers);
      await waiting; // createStream was called and is held
      const release = hold!;
      expect((await api.del(headers)).status).toBe(200);
      release();
      const res = await racing;
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(await errorOf(res)).toMatchObject({ status: 404, code: -32001 });
    },
  );

  it('clientKey: behind one proxy address, maxSessionsPerPrincipal counts each client by the key it returns', async () => {
    await start({
      maxSessionsPerPrincipal: 1,
      maxSessions: 100,
      clientKey: (req) =>
        String(req.headers['x-forwarded-for'] ?? '')
          .split(',')[0]
          ?.trim() || undefined,
    });
    const as = (client: string) => ({ 'x-forwarded-for': `${client}, 10.0.0.1` });
    const open = async (client: string) => {
      const stream = await api.postSse(initializeRequest(), as(client));
      await stream.until((m) => m.id === 1);
      return { 'mcp-session-id': stream.response.headers.get('mcp-session-id')!, ...as(client) };
    };
    const alice = await open('203.0.113.7');
    const bob = await open('198.51.100.9');
    const alice2 = await open('203.0.113.7');
    // Alice's second session let go of her first; Bob's, through the same socket address, lives on.
    expect((await errorOf(await api.post(callTool(2, 'test_simple_text'), alice))).status).toBe(404);
    for (const headers of [bob, alice2]) await (await api.postSse(callTool(3, 'test_simple_text'), headers)).until((m) => m.id === 3);
  });

  // The node bridge knows the client's address; a fetch handler (Next) does not, so there the
  // per-principal cap counts authenticated principals only (see the option's documentation).
  it('maxSessionsPerPrincipal: one client (here, one address without auth) gives up its own idle sessions first', async () => {
    await start({ maxSessionsPerPrincipal: 2, maxSessions: 100 });
    const first = await openSession(api);
    await openSession(api);
    await openSession(api);
    const e = await errorOf(await api.post(callTool(2, 'test_simple_text'), first.headers));
    expect(e.status).toBe(404);
    if (sut.inProcess) expect(sut.inProcess.handler.sessionCount).toBe(2);
  });
});
