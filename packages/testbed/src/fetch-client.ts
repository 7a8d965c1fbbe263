/**
 * A raw Streamable HTTP client over fetch, for wire-level tests: exact bytes, parsed SSE blocks,
 * no SDK. Requests come from requests.ts; a connection cut at an exact byte is raw-client.ts's.
 */
import { initializeRequest, LEGACY, routingHeaders } from './requests.js';
import { messagesOf, parseBlock, SseSplitter, type SseBlock } from './sse.js';

/** An SSE response read as it arrives: its blocks, and its text as received. */
export class SseStream {
  raw = '';
  readonly blocks: SseBlock[] = [];
  ended = false;
  private readonly splitter = new SseSplitter();
  private cursor = 0;
  private wake: (() => void) | undefined;
  readonly done: Promise<void>;
  private readonly controller: AbortController;

  constructor(
    readonly response: Response,
    controller: AbortController,
  ) {
    this.controller = controller;
    this.done = this.pump();
  }

  private async pump(): Promise<void> {
    const reader = this.response.body!.pipeThrough(new TextDecoderStream()).getReader();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        this.raw += value;
        for (const raw of this.splitter.push(value)) this.blocks.push(parseBlock(raw));
        this.notify();
      }
    } catch {
      // Aborted by the test, or the server cut the connection: both end the stream.
    } finally {
      this.ended = true;
      this.notify();
    }
  }

  private notify(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  /** The next block not yet taken; rejects if the stream ends first or after `timeoutMs`. */
  async next(timeoutMs = 10_000): Promise<SseBlock> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.cursor < this.blocks.length) return this.blocks[this.cursor++]!;
      if (this.ended) throw new Error(`stream ended after ${this.blocks.length} blocks; raw:\n${this.raw}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no SSE block within ${timeoutMs} ms; raw so far:\n${this.raw}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
    }
  }

  /** Blocks with data (messages), parsed, until a predicate matches (inclusive). */
  async until(pred: (message: any, block: SseBlock) => boolean, timeoutMs = 10_000): Promise<SseBlock[]> {
    const out: SseBlock[] = [];
    for (;;) {
      const b = await this.next(timeoutMs);
      out.push(b);
      if (b.data) {
        if (pred(JSON.parse(b.data), b)) return out;
      }
    }
  }

  /** Waits until the server ends the response; rejects after `timeoutMs`. */
  async ended_(timeoutMs = 10_000): Promise<void> {
    let t: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      this.done,
      new Promise((_, reject) => {
        t = setTimeout(() => reject(new Error(`stream still open after ${timeoutMs} ms; raw:\n${this.raw}`)), timeoutMs);
      }),
    ]).finally(() => clearTimeout(t));
  }

  rest(): SseBlock[] {
    const r = this.blocks.slice(this.cursor);
    this.cursor = this.blocks.length;
    return r;
  }

  abort(): void {
    this.controller.abort();
  }
}

export interface McpHttp {
  url: string;
  post(body: unknown, headers?: Record<string, string>): Promise<Response>;
  postSse(body: unknown, headers?: Record<string, string>): Promise<SseStream>;
  get(headers?: Record<string, string>): Promise<Response>;
  getSse(headers?: Record<string, string>): Promise<SseStream>;
  del(headers?: Record<string, string>): Promise<Response>;
}

export function http(url: string): McpHttp {
  const open = async (method: string, headers: Record<string, string>, body?: string) => {
    const controller = new AbortController();
    const response = await fetch(url, { method, headers, body, signal: controller.signal });
    return { response, controller };
  };
  const postHeaders = (h: Record<string, string>) => ({
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': LEGACY,
    ...h,
  });
  const getHeaders = (h: Record<string, string>) => ({ accept: 'text/event-stream', 'mcp-protocol-version': LEGACY, ...h });
  const sse = ({ response, controller }: { response: Response; controller: AbortController }) => {
    if (!(response.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
      throw new Error(`expected an SSE response, got ${response.status} ${response.headers.get('content-type')}`);
    }
    return new SseStream(response, controller);
  };
  return {
    url,
    post: async (body, h = {}) => (await open('POST', postHeaders(h), typeof body === 'string' ? body : JSON.stringify(body))).response,
    postSse: async (body, h = {}) => sse(await open('POST', postHeaders(h), typeof body === 'string' ? body : JSON.stringify(body))),
    get: async (h = {}) => (await open('GET', getHeaders(h))).response,
    getSse: async (h = {}) => sse(await open('GET', getHeaders(h))),
    del: async (h = {}) => (await open('DELETE', { 'mcp-protocol-version': LEGACY, ...h })).response,
  };
}

/** Initializes a session over raw HTTP; returns its id and the initialize stream. */
export async function openSession(api: McpHttp, protocolVersion = LEGACY): Promise<{ sessionId: string; headers: Record<string, string> }> {
  const stream = await api.postSse(initializeRequest(1, protocolVersion), { 'mcp-protocol-version': protocolVersion });
  const sessionId = stream.response.headers.get('mcp-session-id');
  if (!sessionId) throw new Error('no mcp-session-id on initialize');
  await stream.until((m) => m.id === 1);
  await stream.ended_();
  const headers = { 'mcp-session-id': sessionId, 'mcp-protocol-version': protocolVersion };
  const ack = await api.post({ jsonrpc: '2.0', method: 'notifications/initialized' }, headers);
  if (ack.status !== 202) throw new Error(`initialized notification: ${ack.status}`);
  return { sessionId, headers };
}

export async function errorOf(response: Response): Promise<{ status: number; code: number; message: string; body: any }> {
  const text = await response.text();
  const body = JSON.parse(text);
  return { status: response.status, code: body.error?.code, message: body.error?.message, body };
}

/** A request through node:http, for headers fetch will not send as given (Host). */
export async function rawRequest(url: string, init: { method: string; headers: Record<string, string>; body?: string }): Promise<Response> {
  const { request } = await import('node:http');
  return new Promise((resolve, reject) => {
    const req = request(url, { method: init.method, headers: init.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const headers = new Headers();
        for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') headers.set(k, v);
        resolve(new Response(Buffer.concat(chunks).toString('utf8'), { status: res.statusCode!, headers }));
      });
    });
    req.on('error', reject);
    req.end(init.body);
  });
}

/** POSTs a 2026 request; `headers` override the routing headers (`undefined` removes one). */
export async function modernPost(
  url: string,
  body: { method: string; params?: Record<string, unknown> } | string,
  headers: Record<string, string | undefined> = {},
): Promise<Response> {
  const base = typeof body === 'string' ? {} : routingHeaders(body);
  const merged: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...base, ...headers })) if (v !== undefined) merged[k] = v;
  return fetch(url, { method: 'POST', headers: merged, body: typeof body === 'string' ? body : JSON.stringify(body) });
}

/** The answer to a 2026 request: one JSON body, or an SSE stream whose data frames end with it. */
export async function modernAnswer(
  response: Response,
): Promise<{ status: number; json: boolean; messages: any[]; answer: any; raw: string }> {
  const type = response.headers.get('content-type') ?? '';
  if (type.startsWith('application/json')) {
    const answer = await response.json();
    return { status: response.status, json: true, messages: [answer], answer, raw: JSON.stringify(answer) };
  }
  if (!type.startsWith('text/event-stream')) throw new Error(`unexpected ${response.status} ${type}: ${await response.text()}`);
  const stream = new SseStream(response, new AbortController());
  await stream.ended_();
  const messages = messagesOf(stream.blocks);
  return { status: response.status, json: false, messages, answer: messages.at(-1), raw: stream.raw };
}
