/**
 * Calls that outlive their response: on a serverless platform an instance may be frozen
 * once no response is in flight, so a call whose stream the tool closed with `closeSSEStream`, or a
 * task, is registered with the platform's `waitUntil` until it ends; and `maxCallDurationMs` ends a
 * call (or a task) that would run past the platform's limit with an error its client reads.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { closeSSEStream, createMcpHandler, toFetchHandler } from '@mcp-kit/core';
import { createFixtureServer } from '@mcp-kit/fixtures';
import { inProcessAdapters, nextAdapter, type ServerUnderTest } from '@mcp-kit/testbed/adapters';
import { envelope, modernRequest, callTool, initializeRequest, LEGACY } from '@mcp-kit/testbed/requests';
import { modernAnswer, modernPost, http, openSession, type SseStream } from '@mcp-kit/testbed/fetch-client';
import type { SseBlock } from '@mcp-kit/testbed/sse';

const TASKS = 'io.modelcontextprotocol/tasks';
const withTasks = envelope({ 'io.modelcontextprotocol/clientCapabilities': { extensions: { [TASKS]: {} } } });

/** What the handler handed to `waitUntil`, and whether each promise has settled. */
class Kept {
  readonly works: { promise: Promise<void>; settled: boolean }[] = [];
  readonly waitUntil = (promise: Promise<void>): void => {
    const work = { promise, settled: false };
    void promise.then(() => (work.settled = true));
    this.works.push(work);
  };
}

interface Gate {
  release?: () => void;
  aborted?: Promise<void>;
}

/** `gated` closes its stream and waits for the test; `forever` closes its stream and runs until cancelled. */
function outlivingServer(gate: Gate): McpServer {
  const server = new McpServer({ name: 'outlive', version: '1.0.0' });
  server.registerTool('gated', {}, async (extra) => {
    closeSSEStream(extra, 50);
    await new Promise<void>((resolve) => (gate.release = resolve));
    return { content: [{ type: 'text', text: 'released' }] };
  });
  server.registerTool('forever', {}, async (extra) => {
    closeSSEStream(extra, 50);
    gate.aborted = new Promise<void>((resolve) => extra.signal.addEventListener('abort', () => resolve(), { once: true }));
    await gate.aborted;
    return { content: [{ type: 'text', text: 'stopped' }] };
  });
  return server;
}

/** Reads a closed stream to its end and resumes it from its last event id until message `id` arrives. */
async function resumeUntil(url: string, first: SseStream, headers: Record<string, string>, id: number): Promise<any> {
  await first.ended_();
  const lastId = (blocks: SseBlock[]) => [...blocks].reverse().find((b) => b.id)?.id;
  for (let cursor = lastId(first.blocks)!; ;) {
    const resumed = await http(url).getSse({ ...headers, 'last-event-id': cursor });
    await resumed.ended_();
    const answer = resumed.blocks.find((b) => b.data && JSON.parse(b.data).id === id);
    if (answer) return JSON.parse(answer.data!);
    cursor = lastId(resumed.blocks) ?? cursor;
  }
}

describe.each(inProcessAdapters)('calls that outlive their response: $name', (adapter) => {
  let sut: ServerUnderTest | undefined;
  afterEach(async () => {
    await sut?.close();
    sut = undefined;
  });

  it('waitUntil holds a 2025 call whose stream the tool closed until its answer is stored, and its client reads it', async () => {
    const gate: Gate = {};
    const kept = new Kept();
    sut = await adapter.start({ server: () => outlivingServer(gate), waitUntil: kept.waitUntil });
    const { headers } = await openSession(http(sut.url));
    // The initialize request was kept too, and let go once answered.
    expect(kept.works).toHaveLength(1);
    await kept.works[0]!.promise;

    const stream = await http(sut.url).postSse(callTool(2, 'gated'), headers);
    await stream.ended_();
    expect(kept.works).toHaveLength(2);
    const call = kept.works[1]!;
    // The response is over, the tool still runs: the platform must keep the instance.
    await new Promise((resolve) => setImmediate(resolve));
    expect(call.settled).toBe(false);
    gate.release!();
    await call.promise;
    const answer = await resumeUntil(sut.url, stream, headers, 2);
    expect(answer.result.content[0].text).toBe('released');
    expect(sut.errors).toEqual([]);
  });

  it('standaloneStream: false answers a GET without Last-Event-ID 405 with a JSON-RPC error; resumes are still served', async () => {
    const gate: Gate = {};
    sut = await adapter.start({ server: () => outlivingServer(gate), standaloneStream: false });
    const { headers } = await openSession(http(sut.url));
    const refused = await http(sut.url).get(headers);
    expect(refused.status).toBe(405);
    expect(refused.headers.get('allow')).toBe('GET, POST, DELETE');
    const body = (await refused.json()) as { jsonrpc: string; error: { code: number; message: string } };
    expect(body).toMatchObject({ jsonrpc: '2.0', error: { code: -32000 } });
    expect(body.error.message).toMatch(/no standalone SSE stream/);
    const stream = await http(sut.url).postSse(callTool(2, 'gated'), headers);
    await stream.ended_();
    gate.release!();
    expect(await resumeUntil(sut.url, stream, headers, 2)).toMatchObject({ result: { content: [{ text: 'released' }] } });
  });

  it('maxCallDurationMs answers a call that runs too long with -32603 and cancels its tool; the session goes on', async () => {
    const gate: Gate = {};
    const kept = new Kept();
    sut = await adapter.start({ server: () => outlivingServer(gate), waitUntil: kept.waitUntil, maxCallDurationMs: 300 });
    const { headers } = await openSession(http(sut.url));
    const started = Date.now();
    const stream = await http(sut.url).postSse(callTool(2, 'forever'), headers);
    const answer = await resumeUntil(sut.url, stream, headers, 2);
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    expect(answer.error).toEqual({
      code: -32603,
      message: 'Internal error: the call ran longer than maxCallDurationMs (300 ms) and was stopped',
      data: { maxCallDurationMs: 300 },
    });
    await gate.aborted;
    await kept.works[1]!.promise;
    expect(sut.errors.map((e) => e.message)).toEqual(['1 request(s) ran past maxCallDurationMs (300 ms): answered with an error']);
    // The id is free again and the session serves the next call.
    const next = await http(sut.url).postSse(callTool(2, 'test_simple_text'), headers);
    expect((await next.until((m) => m.id === 2)).at(-1)!.data).toContain('"result"');
  });

  it('a task is kept with waitUntil until it ends; past maxCallDurationMs it fails with the error and its tool is cancelled', async () => {
    const gate: Gate = {};
    const kept = new Kept();
    sut = await adapter.start({ server: () => outlivingServer(gate), waitUntil: kept.waitUntil, maxCallDurationMs: 300 });
    const created = await modernAnswer(
      await modernPost(sut.url, modernRequest(1, 'tools/call', { name: 'forever', arguments: {} }, withTasks)),
    );
    expect(created.answer.result.resultType).toBe('task');
    const { taskId } = created.answer.result;
    expect(kept.works).toHaveLength(1);
    await kept.works[0]!.promise;
    await gate.aborted;
    const got = await modernAnswer(await modernPost(sut.url, modernRequest(2, 'tasks/get', { taskId }, withTasks)));
    expect(got.answer.result.status).toBe('failed');
    expect(got.answer.result.error).toMatchObject({ code: -32603, data: { maxCallDurationMs: 300 } });
  });
});

describe('waitUntil and maxCallDurationMs: options and the fetch bridge', () => {
  it('refuses a waitUntil that is not a function and a maxCallDurationMs that is not a positive integer', () => {
    const server = () => createFixtureServer();
    expect(() => createMcpHandler({ server, waitUntil: 'yes' as never })).toThrow(/waitUntil must be a function/);
    expect(() => createMcpHandler({ server, maxCallDurationMs: 0 })).toThrow(/maxCallDurationMs must be a positive integer/);
  });

  it("a request's own waitUntil (the fetch call context: Cloudflare's ctx.waitUntil) wins over the handler's", async () => {
    const handlerWide = new Kept();
    const perRequest = new Kept();
    const handler = createMcpHandler({ server: () => createFixtureServer(), waitUntil: handlerWide.waitUntil });
    const fetchHandler = toFetchHandler(handler);
    const request = new Request('http://127.0.0.1/mcp', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': LEGACY },
      body: JSON.stringify(initializeRequest(1)),
    });
    const response = await fetchHandler(request, { waitUntil: perRequest.waitUntil });
    expect(response.status).toBe(200);
    expect(await response.text()).toContain('"protocolVersion"');
    expect([handlerWide.works.length, perRequest.works.length]).toEqual([0, 1]);
    await perRequest.works[0]!.promise;
    await handler.close();
  });
});

describe("calls that outlive their response: next start (mcpNext's default waitUntil, Next's after)", () => {
  let sut: ServerUnderTest | undefined;
  afterEach(async () => {
    await sut?.close();
    sut = undefined;
  });

  it("a polled long_task runs under Next's after() to its end; past maxCallDurationMs its client reads -32603", async () => {
    sut = await nextAdapter.start({ maxCallDurationMs: 1_500 });
    const { headers } = await openSession(http(sut.url));
    const quick = await http(sut.url).postSse(callTool(2, 'long_task', { steps: 4, intervalMs: 20, closeEvery: 2, retryMs: 50 }), headers);
    expect((await resumeUntil(sut.url, quick, headers, 2)).result.content[0].text).toBe('completed 4 steps');
    const slow = await http(sut.url).postSse(
      callTool(3, 'long_task', { steps: 100, intervalMs: 100, closeEvery: 2, retryMs: 50 }),
      headers,
    );
    const answer = await resumeUntil(sut.url, slow, headers, 3);
    expect(answer.error).toMatchObject({ code: -32603, data: { maxCallDurationMs: 1_500 } });
    // after() was called in the request's scope: nothing went to onError (stderr) but the expired call.
    const messages = sut.errors.map((e) => e.message);
    expect(messages.some((m) => m.includes('1 request(s) ran past maxCallDurationMs (1500 ms)'))).toBe(true);
    expect(messages.filter((m) => !m.includes('ran past maxCallDurationMs'))).toEqual([]);
  }, 30_000);
});
