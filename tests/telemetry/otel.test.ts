/**
 * `@mcp-kit/core/otel` with the real OpenTelemetry SDK and in-memory exporters, on every adapter:
 * Express and Koa in this process, Next.js through `next start` of apps/next-example with
 * MCP_KIT_OTEL=memory (the SDK then runs inside the Next server, set up by its instrumentation.ts,
 * and GET /mcp-kit/otel hands over what it recorded). One server per adapter lives through a
 * polling `long_task` (two server closes, two resumes), a resume from an evicted cursor (410), a
 * reader that stops reading (cut past maxBufferedBytes), a hibernated session woken by its next
 * call, a DELETE, a 2026-07-28 call that becomes a task and another 2026 request; then the
 * recorded metrics and spans are checked.
 */
import { request as httpRequest, type ClientRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createMcpHandler } from '@mcp-kit/core';
import { instrumentOpenTelemetry } from '@mcp-kit/core/otel';
import { createFixtureServer } from '@mcp-kit/fixtures';
import { adapters, type Adapter, type ServerUnderTest } from '@mcp-kit/testbed/adapters';
import {
  createMemoryTelemetry,
  histogram,
  metricsSnapshot,
  points,
  spansSnapshot,
  total,
  type TelemetrySnapshot,
} from '@mcp-kit/testbed/otel';
import { envelope, modernRequest, callTool, LEGACY } from '@mcp-kit/testbed/requests';
import { modernAnswer, modernPost, errorOf, http, openSession } from '@mcp-kit/testbed/fetch-client';

const OPTIONS = { retryMs: 150, hibernateAfterMs: 0, maxBufferedBytes: 64 * 1024, eventStore: { maxEventsPerStream: 20 } };
// A step every 50 ms and the client away at least 200 ms: each resume replays a step or more (the
// first 150 ms before the client can be back), and the next close and the end of the call (8 steps,
// 400 ms, later) come well after it is back, even on a loaded machine.
const POLLING = { steps: 24, intervalMs: 50, closeEvery: 8, retryMs: 200 };

/** Polls `probe` until it returns something, at most `timeoutMs`: for states only a snapshot shows. */
async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

interface Instrumented {
  sut: ServerUnderTest;
  snapshot(): Promise<TelemetrySnapshot>;
  close(): Promise<void>;
}

async function startInstrumented(adapter: Adapter): Promise<Instrumented> {
  if (adapter.inProcess) {
    const memory = createMemoryTelemetry();
    const sut = await adapter.start(OPTIONS);
    const stop = instrumentOpenTelemetry(sut.inProcess!.handler, {
      meterProvider: memory.meterProvider,
      tracerProvider: memory.tracerProvider,
    });
    return {
      sut,
      snapshot: () => memory.snapshot(),
      async close() {
        stop();
        await sut.close();
        await memory.shutdown();
      },
    };
  }
  // The child inherits the environment: the SDK is set up inside `next start` (see apps/next-example/otel.ts).
  process.env.MCP_KIT_OTEL = 'memory';
  const sut = await adapter.start(OPTIONS).finally(() => delete process.env.MCP_KIT_OTEL);
  const origin = new URL(sut.url).origin;
  return {
    sut,
    async snapshot() {
      const res = await fetch(`${origin}/mcp-kit/otel`);
      if (!res.ok) throw new Error(`/mcp-kit/otel answered ${res.status}: ${await res.text()}`);
      const raw = await res.json();
      return { metrics: metricsSnapshot(raw.metrics), spans: spansSnapshot(raw.spans) };
    },
    close: () => sut.close(),
  };
}

/** A POST whose response is never read: the server has to cut it once maxBufferedBytes is unread. */
function stalledPost(url: string, headers: Record<string, string>, body: unknown): ClientRequest {
  const req = httpRequest(url, {
    method: 'POST',
    headers: {
      ...headers,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': LEGACY,
    },
  });
  req.on('response', (res) => res.pause());
  req.on('error', () => {});
  req.end(JSON.stringify(body));
  return req;
}

function modernCall(id: number) {
  const meta = {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientInfo': { name: 'otel-test', version: '1.0.0' },
    'io.modelcontextprotocol/clientCapabilities': {},
  };
  return { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'test_simple_text', arguments: {}, _meta: meta } };
}

describe.each(adapters)('OpenTelemetry on $name', (adapter) => {
  let server: Instrumented;
  let final: TelemetrySnapshot;
  let pollingSession: string;
  let result: unknown;

  beforeAll(async () => {
    server = await startInstrumented(adapter);
    const url = server.sut.url;
    const api = http(url);

    // 1. SEP-1699 polling through the SDK client: closes after steps 8 and 16, two resumes.
    const transport = new StreamableHTTPClientTransport(new URL(url));
    const client = new Client({ name: 'otel-test', version: '1.0.0' });
    await client.connect(transport);
    pollingSession = transport.sessionId!;
    result = (await client.callTool({ name: 'long_task', arguments: POLLING })).content;
    await client.close();

    // 2. A resume from a cursor the store evicted (20 events kept per stream): 410.
    const evicting = await openSession(api);
    const post = await api.postSse(callTool(2, 'long_task', { steps: 40, intervalMs: 0 }), evicting.headers);
    await post.ended_();
    const gone = await api.get({ ...evicting.headers, 'last-event-id': post.blocks.find((b) => b.data)!.id! });
    expect((await errorOf(gone)).status).toBe(410);

    // 3. Both sessions are idle now: they hibernate, and the evicting one's next call wakes it.
    await until('two hibernated sessions', async () => {
      const s = await server.snapshot();
      return total(s, 'mcp_kit.sessions', { 'mcp_kit.session.state': 'hibernated' }) >= 2 ? s : undefined;
    });
    const woken = await api.postSse(callTool(3, 'test_simple_text'), evicting.headers);
    await woken.until((m) => m.id === 3);

    // 4. A reader that stops reading while a call writes ~10 MB: cut past maxBufferedBytes.
    const slow = await openSession(api);
    const stalled = stalledPost(url, slow.headers, callTool(4, 'long_task', { steps: 60_000, intervalMs: 0 }));
    await until('a slow-reader cut', async () => {
      const s = await server.snapshot();
      return total(s, 'mcp_kit.sse.closes', { 'mcp_kit.stream.close_reason': 'slow-reader' }) >= 1 ? s : undefined;
    });
    stalled.destroy();
    expect((await api.del(slow.headers)).status).toBe(200);

    // 5. A 2026-07-28 call that becomes a task (the client declares the Tasks extension), polled to its end.
    const withTasks = envelope({ 'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } } });
    const task = (
      await modernAnswer(
        await modernPost(url, modernRequest(6, 'tools/call', { name: 'slow_compute', arguments: { seconds: 1 } }, withTasks)),
      )
    ).answer.result;
    expect(task).toMatchObject({ resultType: 'task', status: 'working' });
    for (let id = 100; ; id++) {
      const polled = (await modernAnswer(await modernPost(url, modernRequest(id, 'tasks/get', { taskId: task.taskId }, withTasks)))).answer
        .result;
      if (polled.status !== 'working') break;
      await new Promise((r) => setTimeout(r, task.pollIntervalMs ?? 100));
    }

    // 6. Another 2026-07-28 request: no session, no task.
    const modern = await api.post(modernCall(5), {
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/call',
      'mcp-name': 'test_simple_text',
    });
    expect(modern.status).toBe(200);
    await modern.text();

    final = await until('the slow reader session closed', async () => {
      const s = await server.snapshot();
      return total(s, 'mcp.server.session.duration', { 'mcp_kit.session.end_reason': 'delete' }) >= 1 ? s : undefined;
    });
  }, 90_000);

  afterAll(async () => {
    await server?.close();
  });

  it('the polling call completed through two server closes', () => {
    expect(result).toEqual([{ type: 'text', text: 'completed 24 steps' }]);
  });

  it('counts server closes, resumes, what they replayed and how long the client stayed away', () => {
    expect(total(final, 'mcp_kit.sse.closes', { 'mcp_kit.stream.close_reason': 'server-close' })).toBe(2);
    expect(total(final, 'mcp_kit.sse.closes', { 'mcp_kit.stream.kind': 'post', 'mcp_kit.stream.close_reason': 'server-close' })).toBe(1);
    expect(total(final, 'mcp_kit.resumes', { 'mcp_kit.stream.kind': 'resume' })).toBe(2);
    expect(total(final, 'mcp_kit.events.replayed', { 'mcp_kit.stream.kind': 'resume' })).toBeGreaterThanOrEqual(2);
    const replayed = histogram(final, 'mcp_kit.resume.replay.events');
    expect(replayed.count).toBe(2);
    expect(replayed.min).toBeGreaterThanOrEqual(1);
    expect(histogram(final, 'mcp_kit.resume.replay.size').sum).toBeGreaterThan(0);
    const away = histogram(final, 'mcp_kit.resume.away_time', { 'mcp_kit.stream.kind': 'resume' });
    expect(away.count).toBe(2);
    expect(away.min).toBeGreaterThanOrEqual(0.199);
    expect(away.max).toBeLessThan(5);
    expect(final.metrics['mcp_kit.resume.away_time']!.unit).toBe('s');
  });

  it('counts stored events, the 410, the slow-reader cut, hibernation and the wake', () => {
    // 24 + 40 + 1 log notifications and results at least, and the slow reader's.
    expect(total(final, 'mcp_kit.events.stored')).toBeGreaterThan(100);
    expect(total(final, 'mcp_kit.events.stored.size')).toBeGreaterThan(100 * 50);
    expect(total(final, 'mcp_kit.cursor.evicted')).toBe(1);
    expect(total(final, 'mcp_kit.sse.closes', { 'mcp_kit.stream.kind': 'post', 'mcp_kit.stream.close_reason': 'slow-reader' })).toBe(1);
    expect(total(final, 'mcp_kit.session.hibernations')).toBeGreaterThanOrEqual(1);
    expect(histogram(final, 'mcp_kit.session.wake.duration').count).toBeGreaterThanOrEqual(1);
    expect(
      histogram(final, 'mcp_kit.store.duration', { 'mcp_kit.store': 'events', 'mcp_kit.store.operation': 'replayAfter' }).count,
    ).toBeGreaterThanOrEqual(3);
    // Next's production build renames classes: there the store is `custom` unless named in the options.
    const implementation = points(final, 'mcp_kit.store.duration')[0]!.attributes['mcp_kit.store.implementation'];
    expect(implementation).toBe(adapter.inProcess ? 'MemoryEventStore' : 'custom');
  });

  it('times the polling call from its POST to its answer, across the resumes', () => {
    const call = histogram(final, 'mcp.server.operation.duration', {
      'mcp.method.name': 'tools/call',
      'gen_ai.tool.name': 'long_task',
      'gen_ai.operation.name': 'execute_tool',
      'mcp_kit.era': 'legacy',
    });
    expect(call.count).toBeGreaterThanOrEqual(2);
    // 23 pauses of 50 ms between its 24 steps.
    expect(call.max).toBeGreaterThanOrEqual(1.1);
    expect(histogram(final, 'mcp.server.session.duration', { 'mcp_kit.session.end_reason': 'delete' }).count).toBe(1);
    // 2026 requests are timed too, until their answer went out.
    const modern = histogram(final, 'mcp.server.operation.duration', { 'mcp.method.name': 'tools/call', 'mcp_kit.era': 'modern' });
    expect(modern.count).toBe(2);
  });

  it('counts requests of both eras and the open connections by kind', () => {
    expect(total(final, 'mcp_kit.requests', { 'mcp_kit.era': 'legacy', 'mcp.method.name': 'tools/call' })).toBeGreaterThanOrEqual(3);
    expect(
      total(final, 'mcp_kit.requests', { 'mcp_kit.era': 'legacy', 'http.request.method': 'GET', 'http.response.status_code': 410 }),
    ).toBe(1);
    // slow_compute (a task) and test_simple_text; then the task's polls.
    expect(total(final, 'mcp_kit.requests', { 'mcp_kit.era': 'modern', 'mcp.method.name': 'tools/call' })).toBe(2);
    expect(total(final, 'mcp_kit.requests', { 'mcp_kit.era': 'modern', 'mcp.method.name': 'tasks/get' })).toBeGreaterThanOrEqual(1);
    // Every connection of the scenario ended (the SDK client's GET stream closed with it).
    for (const kind of ['post', 'resume']) expect(total(final, 'mcp_kit.sse.connections', { 'mcp_kit.stream.kind': kind })).toBe(0);
  });

  it('follows tasks by status', () => {
    expect(total(final, 'mcp_kit.task.status_changes', { 'mcp_kit.task.status': 'working' })).toBe(1);
    expect(total(final, 'mcp_kit.task.status_changes', { 'mcp_kit.task.status': 'completed' })).toBe(1);
    expect(total(final, 'mcp_kit.tasks', { 'mcp_kit.task.status': 'working' })).toBe(0);
  });

  it('records one SERVER span per HTTP request: the POST and its resumes named after the call, with closes, retries and gaps', () => {
    const ours = final.spans.filter((s) => s.scope === '@mcp-kit/core');
    expect(ours.every((s) => s.kind === 1)).toBe(true);
    const call = ours.filter(
      (s) =>
        s.name === 'tools/call long_task' &&
        s.attributes['mcp.session.id'] === ours.find((x) => x.attributes['mcp_kit.stream.kind'] === 'resume')?.attributes['mcp.session.id'],
    );
    const post = call.find((s) => s.attributes['mcp_kit.stream.kind'] === 'post')!;
    expect(post.attributes).toMatchObject({
      'http.request.method': 'POST',
      'http.response.status_code': 200,
      'mcp.method.name': 'tools/call',
      'gen_ai.tool.name': 'long_task',
      'mcp_kit.era': 'legacy',
      'mcp_kit.stream.close_reason': 'server-close',
      'mcp_kit.stream.retry_ms': 200,
    });
    const resumes = call.filter((s) => s.attributes['mcp_kit.stream.kind'] === 'resume').sort((a, b) => a.startMs - b.startMs);
    expect(resumes).toHaveLength(2);
    expect(resumes.map((s) => s.attributes['mcp_kit.stream.close_reason'])).toEqual(['server-close', 'complete']);
    for (const r of resumes) {
      expect(r.attributes['http.request.method']).toBe('GET');
      expect(r.attributes['mcp_kit.resume.away_ms']).toBeGreaterThanOrEqual(199);
      expect(r.attributes['mcp_kit.resume.replayed_events']).toBeGreaterThanOrEqual(1);
    }
    // The POST's span lasts until the server closed its stream, after eight steps 50 ms apart.
    expect(post.endMs - post.startMs).toBeGreaterThanOrEqual(340);
    expect(ours.some((s) => s.attributes['http.response.status_code'] === 410)).toBe(true);
    expect(ours.some((s) => s.attributes['mcp_kit.stream.close_reason'] === 'slow-reader')).toBe(true);
    // A 2026 request is recorded when its answer goes out (the engine lets go of it before).
    const modern = ours.find((s) => s.name === 'tools/call test_simple_text' && s.attributes['mcp_kit.era'] === 'modern');
    expect(modern?.attributes['http.response.status_code']).toBe(200);
    const task = ours.find((s) => s.name === 'tools/call slow_compute' && s.attributes['mcp_kit.era'] === 'modern');
    expect(task?.attributes['http.response.status_code']).toBe(200);
    const initialize = ours.find((s) => s.name === 'initialize')!;
    expect(initialize.attributes['mcp.session.id']).toMatch(/^[0-9a-f]{16}$/);
  });

  it('never records a session id, only its hash', () => {
    const values = final.spans.flatMap((s) => Object.values(s.attributes).map(String));
    expect(values).not.toContain(pollingSession);
    expect(values.some((v) => v.includes(pollingSession))).toBe(false);
  });
});

describe('without instrumentation', () => {
  it('the engine builds no events; instrumenting turns them on, stopping turns them off', async () => {
    const handler = createMcpHandler({ server: () => createFixtureServer() });
    expect(handler.options.telemetry.on).toBe(false);
    const memory = createMemoryTelemetry();
    const stop = instrumentOpenTelemetry(handler, { meterProvider: memory.meterProvider, tracerProvider: memory.tracerProvider });
    expect(handler.options.telemetry.on).toBe(true);
    stop();
    expect(handler.options.telemetry.on).toBe(false);
    await handler.close();
    await memory.shutdown();
  });
});
