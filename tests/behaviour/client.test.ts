/**
 * End to end with the SDK's own Client + StreamableHTTPClientTransport over real HTTP, against
 * every adapter: what a user's client actually receives.
 */
import { afterAll, afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { answerServerRequests } from '@mcp-kit/testbed/clients';
import { adapters, sharedStarts, type ServerUnderTest } from '@mcp-kit/testbed/adapters';
import { parseBlock } from '@mcp-kit/testbed/sse';

interface WireLog {
  /** When a response body ended, as the client saw it. */
  ends: number[];
  /** GETs that carried a Last-Event-ID, with the time the client sent them. */
  resumes: Array<{ at: number; lastEventId: string }>;
  /** Every SSE response: the request it answers (the HTTP method, the JSON-RPC body of a POST) and the messages it carried. */
  streams: Array<{ method: string; request: any; messages: any[] }>;
}

/** A fetch that records when streams end, when the client comes back, and what came on which stream. */
function recordingFetch(log: WireLog): typeof fetch {
  return async (input, init) => {
    const method = init?.method ?? 'GET';
    const headers = new Headers(init?.headers);
    const lastEventId = headers.get('last-event-id');
    if (method === 'GET' && lastEventId) log.resumes.push({ at: performance.now(), lastEventId });
    const response = await fetch(input, init);
    if (!response.body) return response;
    const stream = { method, request: typeof init?.body === 'string' ? JSON.parse(init.body) : undefined, messages: [] as any[] };
    const sse = response.headers.get('content-type')?.startsWith('text/event-stream') ?? false;
    if (sse) log.streams.push(stream);
    const decoder = new TextDecoder();
    let pending = '';
    const body = response.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          controller.enqueue(chunk);
          if (!sse) return;
          pending += decoder.decode(chunk, { stream: true });
          for (let at = pending.indexOf('\n\n'); at !== -1; at = pending.indexOf('\n\n')) {
            const block = parseBlock(pending.slice(0, at));
            pending = pending.slice(at + 2);
            if (block.data) stream.messages.push(JSON.parse(block.data));
          }
        },
        flush() {
          log.ends.push(performance.now());
        },
      }),
    );
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}

async function connect(url: string, log: WireLog = { ends: [], resumes: [], streams: [] }) {
  const client = new Client({ name: 'e2e', version: '1.0.0' }, { capabilities: { sampling: {}, elicitation: {} } });
  const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch(log) });
  await client.connect(transport);
  const steps: number[] = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    const data = n.params.data as { step?: number };
    if (typeof data?.step === 'number') steps.push(data.step);
  });
  return { client, transport, steps, log };
}

describe.each(adapters)('SDK client: $name', (adapter) => {
  let sut: ServerUnderTest;
  let clients: Client[] = [];
  const servers = sharedStarts(adapter);
  beforeEach(async () => {
    sut = await servers.start();
  });
  afterAll(() => servers.closeAll());
  afterEach(async () => {
    for (const c of clients) await c.close();
    clients = [];
    await sut.close();
  });

  it('long_task with closeEvery delivers every log once, in order, then the result, across several server closes', async () => {
    const { client, steps, log } = await connect(sut.url);
    clients.push(client);
    const progress: number[] = [];
    const result = await client.callTool(
      { name: 'long_task', arguments: { steps: 40, intervalMs: 40, closeEvery: 8, retryMs: 50 } },
      CallToolResultSchema,
      {
        onprogress: (p) => progress.push(p.progress),
        timeout: 20_000,
      },
    );
    expect(result.content).toEqual([{ type: 'text', text: 'completed 40 steps' }]);
    expect(steps).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    expect(progress).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    // Closes after steps 8, 16, 24, 32: four reconnections, each from where the client was.
    expect(log.resumes.length).toBe(4);
    expect(new Set(log.resumes.map((r) => r.lastEventId)).size).toBe(4);
    expect(sut.errors).toEqual([]);
  });

  it("the client's reconnect delay follows the retryMs of each closeSSEStream call", async () => {
    const { client, log } = await connect(sut.url);
    clients.push(client);
    const measured: Record<number, number[]> = {};
    for (const retryMs of [150, 1200]) {
      log.ends.length = 0;
      log.resumes.length = 0;
      // One close after step 2; the tool finishes while the client waits, the resume replays it.
      await client.callTool({ name: 'long_task', arguments: { steps: 4, intervalMs: 0, closeEvery: 2, retryMs } });
      expect(log.resumes.length).toBe(1);
      // Each resume follows the end of the stream the server closed just before it.
      measured[retryMs] = log.resumes.map((r) => r.at - Math.max(...log.ends.filter((e) => e <= r.at)));
    }
    for (const [retry, delays] of Object.entries(measured)) {
      for (const d of delays) {
        expect(d, `retry ${retry}: waited ${d.toFixed(0)} ms`).toBeGreaterThanOrEqual(Number(retry) - 5);
        expect(d, `retry ${retry}: waited ${d.toFixed(0)} ms`).toBeLessThan(Number(retry) + 400);
      }
    }
  });

  it('server-to-client requests (sampling, elicitation) work on the request stream', async () => {
    const { client, log } = await connect(sut.url);
    clients.push(client);
    answerServerRequests(client);
    const sampled = await client.callTool({ name: 'test_sampling', arguments: { prompt: 'hello' } });
    expect(JSON.stringify(sampled.content)).toContain('echo: hello');
    const elicited = await client.callTool({ name: 'test_elicitation', arguments: { message: 'who are you?' } });
    expect(JSON.stringify(elicited.content)).toContain('ada@example.com');

    // Each question came on the POST stream of the call that asked it (related to that request,
    // 2025-11-25 "Sending Messages to the Server"), and nowhere else: not on the GET stream.
    const asked = (s: WireLog['streams'][number]) =>
      s.messages.filter((m) => m.id !== undefined && m.method !== undefined).map((m) => m.method);
    const callStream = (tool: string) => log.streams.filter((s) => s.method === 'POST' && s.request?.params?.name === tool);
    expect(callStream('test_sampling').map(asked)).toEqual([['sampling/createMessage']]);
    expect(callStream('test_elicitation').map(asked)).toEqual([['elicitation/create']]);
    expect(log.streams.filter((s) => s.method === 'GET').flatMap(asked)).toEqual([]);
  });

  it('test_reconnection returns its result on the resumed GET', async () => {
    const { client, log } = await connect(sut.url);
    clients.push(client);
    const result = await client.callTool({ name: 'test_reconnection', arguments: {} });
    expect(result.isError).toBeFalsy();
    expect(log.resumes.length).toBe(1);
  });
});
