/** A raw Streamable HTTP client for wire-level tests: exact bytes, parsed SSE blocks, no SDK. */

export interface SseBlock {
  id?: string;
  data?: string;
  retry?: number;
  comment?: string;
  /** The block exactly as it came off the wire, without the trailing blank line. */
  raw: string;
}

export class SseStream {
  raw = '';
  readonly blocks: SseBlock[] = [];
  ended = false;
  private buffer = '';
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
        this.buffer += value;
        let at: number;
        while ((at = this.buffer.indexOf('\n\n')) !== -1) {
          const raw = this.buffer.slice(0, at);
          this.buffer = this.buffer.slice(at + 2);
          this.blocks.push(parseBlock(raw));
        }
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

export function parseBlock(raw: string): SseBlock {
  const block: SseBlock = { raw };
  for (const line of raw.split('\n')) {
    if (line.startsWith(':')) {
      block.comment = line.slice(1).trim();
      continue;
    }
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'id') block.id = value;
    else if (field === 'data') block.data = block.data === undefined ? value : `${block.data}\n${value}`;
    else if (field === 'retry') block.retry = Number(value);
  }
  return block;
}

export const PROTOCOL = '2025-11-25';

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
    'mcp-protocol-version': PROTOCOL,
    ...h,
  });
  const getHeaders = (h: Record<string, string>) => ({ accept: 'text/event-stream', 'mcp-protocol-version': PROTOCOL, ...h });
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
    del: async (h = {}) => (await open('DELETE', { 'mcp-protocol-version': PROTOCOL, ...h })).response,
  };
}

export function initializeRequest(id: number | string = 1, protocolVersion = PROTOCOL) {
  return {
    jsonrpc: '2.0',
    id,
    method: 'initialize',
    params: { protocolVersion, capabilities: {}, clientInfo: { name: 'wire-test', version: '1.0.0' } },
  };
}

/** Initializes a session over raw HTTP; returns its id and the initialize stream. */
export async function openSession(
  api: McpHttp,
  protocolVersion = PROTOCOL,
): Promise<{ sessionId: string; headers: Record<string, string> }> {
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

export function callTool(id: number, name: string, args: Record<string, unknown> = {}, meta?: Record<string, unknown>) {
  return { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args, ...(meta ? { _meta: meta } : {}) } };
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
