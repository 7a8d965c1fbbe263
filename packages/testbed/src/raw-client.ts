/**
 * A raw Streamable HTTP client on node:http for the reliability suite: it can cut a connection at
 * an exact byte offset (or before the response arrives), stop reading, and send any header, which
 * fetch cannot. Everything it parses is SSE as a browser's EventSource would: a block counts only
 * once its terminating blank line has arrived.
 */
import { Agent, request as httpRequest, type ClientRequest, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import { initializeRequest, LEGACY } from './requests.js';
import { parseBlock, SseSplitter, type SseBlock } from './sse.js';

/** Keep-alive for the short requests; SSE connections that get cut are destroyed, never reused. */
export const agent = new Agent({ keepAlive: true, maxSockets: Infinity });

export interface RawInit {
  method: string;
  headers?: Record<string, string | string[]>;
  body?: string | Buffer;
}

export interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  text: string;
}

/** One complete request; the body is read whole. Never use it for a stream that does not end. */
export function send(url: string, init: RawInit, attempt = 1): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: init.method, headers: init.headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', (error: NodeJS.ErrnoException) => {
      // A pooled socket the server closed as idle just as we reused it: the request never arrived.
      if (req.reusedSocket && error.code === 'ECONNRESET' && attempt < 3) resolve(send(url, init, attempt + 1));
      else reject(error);
    });
    req.end(init.body);
  });
}

export interface OpenOptions {
  /** Cut the connection once this many body bytes have arrived; bytes past it count as never received. */
  abortAtByte?: number;
  /** Cut the connection right after the request is written, before any response. */
  abortBeforeResponse?: boolean;
  /** Cut the connection when this aborts, response or not (`open` then resolves). */
  signal?: AbortSignal;
  /** Pool to use; default none (a fresh socket, so a cut cannot poison a pooled connection). */
  agent?: Agent | false;
}

/** How a stream ended for the client. */
export type StreamEnd = 'server' | 'aborted' | 'error';

/**
 * An SSE response read through node:http. `ended` settles when the server ends it, the client cuts
 * it, or the socket fails; `blocks` then holds every complete block received before that point.
 */
export class RawSse {
  status = 0;
  headers: IncomingHttpHeaders = {};
  readonly blocks: SseBlock[] = [];
  /** Body bytes the client accepted (never more than `abortAtByte`). */
  bytes = 0;
  private rawChunks: Buffer[] = [];
  private readonly splitter = new SseSplitter();
  private cursor = 0;
  private wake: (() => void) | undefined;
  private res: IncomingMessage | undefined;
  private settle!: (how: StreamEnd) => void;
  endedHow: StreamEnd | undefined;
  readonly ended: Promise<StreamEnd>;

  private constructor(
    private readonly req: ClientRequest,
    private readonly options: OpenOptions,
  ) {
    this.ended = new Promise((resolve) => (this.settle = resolve));
  }

  /** Resolves once the response head arrived (or at once, with `abortBeforeResponse`). */
  static open(url: string, init: RawInit, options: OpenOptions = {}): Promise<RawSse> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(url, { method: init.method, headers: init.headers, agent: options.agent ?? false });
      const stream = new RawSse(req, options);
      req.on('error', (error) => {
        if (stream.endedHow === undefined && stream.res === undefined) {
          if (options.abortBeforeResponse || options.signal?.aborted) return;
          reject(error);
        }
        stream.finish('error');
      });
      req.on('response', (res) => {
        stream.res = res;
        stream.status = res.statusCode!;
        stream.headers = res.headers;
        res.on('data', (chunk: Buffer) => stream.take(chunk));
        res.on('end', () => stream.finish('server'));
        res.on('error', () => stream.finish('error'));
        res.on('close', () => stream.finish(res.complete ? 'server' : 'error'));
        if (options.abortAtByte === 0) stream.abort();
        resolve(stream);
      });
      options.signal?.addEventListener('abort', () => {
        stream.abort();
        resolve(stream);
      });
      req.end(init.body, () => {
        if (options.abortBeforeResponse) {
          stream.abort();
          resolve(stream);
        }
      });
    });
  }

  private take(chunk: Buffer): void {
    if (this.endedHow !== undefined) return;
    const limit = this.options.abortAtByte;
    let cut = false;
    if (limit !== undefined && this.bytes + chunk.length >= limit) {
      chunk = chunk.subarray(0, limit - this.bytes);
      cut = true;
    }
    this.bytes += chunk.length;
    this.rawChunks.push(chunk);
    // Pushed as latin1 so that a cut inside a multi-byte character cannot corrupt a complete block.
    for (const raw of this.splitter.push(chunk.toString('latin1')))
      this.blocks.push(parseBlock(Buffer.from(raw, 'latin1').toString('utf8')));
    this.notify();
    if (cut) this.abort();
  }

  private finish(how: StreamEnd): void {
    if (this.endedHow !== undefined) return;
    this.endedHow = how;
    this.settle(how);
    this.notify();
  }

  private notify(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  /** The body as received, byte for byte (up to the cut). */
  get raw(): string {
    return Buffer.concat(this.rawChunks).toString('utf8');
  }

  /** Bytes of an incomplete block at the end: what a cut or a bad server left half-written. */
  get partial(): string {
    return this.splitter.rest;
  }

  /** Blocks that carry data, parsed as JSON-RPC (the priming event's empty data is skipped). */
  get messages(): Array<{ id?: string; message: any }> {
    return this.blocks.filter((b) => b.data).map((b) => ({ id: b.id, message: JSON.parse(b.data!) }));
  }

  /** The id of the last complete block that carried one: the client's Last-Event-ID. */
  get lastEventId(): string | undefined {
    for (let i = this.blocks.length - 1; i >= 0; i--) if (this.blocks[i]!.id !== undefined) return this.blocks[i]!.id;
    return undefined;
  }

  /** The next block not yet taken; rejects when the stream ends first or after `timeoutMs`. */
  async next(timeoutMs = 10_000): Promise<SseBlock> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.cursor < this.blocks.length) return this.blocks[this.cursor++]!;
      if (this.endedHow !== undefined)
        throw new Error(`stream ended (${this.endedHow}) after ${this.blocks.length} blocks; raw:\n${this.raw.slice(-2000)}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no SSE block within ${timeoutMs} ms; raw so far:\n${this.raw.slice(-2000)}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
    }
  }

  /** Waits for the end; rejects after `timeoutMs` with what arrived so far. */
  async end(timeoutMs = 10_000): Promise<StreamEnd> {
    let t: ReturnType<typeof setTimeout> | undefined;
    try {
      return await Promise.race([
        this.ended,
        new Promise<never>((_, reject) => {
          t = setTimeout(() => reject(new Error(`stream still open after ${timeoutMs} ms; raw:\n${this.raw.slice(-2000)}`)), timeoutMs);
        }),
      ]);
    } finally {
      clearTimeout(t);
    }
  }

  /** Stops reading: the server's writes pile up in its buffers (a slow reader). */
  pause(): void {
    this.res?.pause();
  }

  resume(): void {
    this.res?.resume();
  }

  /** Cuts the connection now (a network drop as the server sees it). */
  abort(): void {
    this.req.destroy();
    this.res?.destroy();
    this.finish('aborted');
  }
}

const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

/** A session opened over raw HTTP, with the calls the suite needs. */
export class RawSession {
  constructor(
    readonly url: string,
    readonly sessionId: string,
    readonly extraHeaders: Record<string, string> = {},
  ) {}

  get headers(): Record<string, string> {
    return { 'mcp-session-id': this.sessionId, 'mcp-protocol-version': LEGACY, ...this.extraHeaders };
  }

  static async open(url: string, extraHeaders: Record<string, string> = {}): Promise<RawSession> {
    const init = await send(url, {
      method: 'POST',
      headers: { ...JSON_HEADERS, 'mcp-protocol-version': LEGACY, ...extraHeaders },
      body: JSON.stringify(initializeRequest()),
    });
    const sessionId = init.headers['mcp-session-id'];
    if (init.status !== 200 || typeof sessionId !== 'string') throw new Error(`initialize: ${init.status} ${init.text.slice(0, 300)}`);
    const session = new RawSession(url, sessionId, extraHeaders);
    const ack = await session.post({ jsonrpc: '2.0', method: 'notifications/initialized' });
    if (ack.status !== 202) throw new Error(`notifications/initialized: ${ack.status} ${ack.text}`);
    return session;
  }

  post(body: unknown): Promise<RawResponse> {
    return send(this.url, { method: 'POST', headers: { ...JSON_HEADERS, ...this.headers }, body: JSON.stringify(body) });
  }

  /** POSTs a request and reads its SSE answer as a stream. */
  postSse(body: unknown, options?: OpenOptions): Promise<RawSse> {
    return RawSse.open(this.url, { method: 'POST', headers: { ...JSON_HEADERS, ...this.headers }, body: JSON.stringify(body) }, options);
  }

  /** `GET` + `Last-Event-ID` (or the standalone stream without one). */
  get(lastEventId?: string, options?: OpenOptions): Promise<RawSse> {
    const headers: Record<string, string> = { accept: 'text/event-stream', ...this.headers };
    if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
    return RawSse.open(this.url, { method: 'GET', headers }, options);
  }

  del(): Promise<RawResponse> {
    return send(this.url, { method: 'DELETE', headers: this.headers });
  }
}

/** Token and sequence number of an event id (`<token>.<seq>`). */
export function splitId(id: string): { token: string; seq: number } {
  const dot = id.lastIndexOf('.');
  return { token: id.slice(0, dot), seq: Number(id.slice(dot + 1)) };
}

/** A JSON-RPC error body as the suite expects every refusal to be. */
export function jsonRpcError(res: RawResponse): { code: number; message: string } {
  let body: any;
  try {
    body = JSON.parse(res.text);
  } catch {
    throw new Error(`${res.status} with a body that is not JSON: ${JSON.stringify(res.text.slice(0, 200))}`);
  }
  // `id` is optional on an error and never null (2025-11-25 and 2026-07-28 schemas alike).
  const badId = body !== null && typeof body === 'object' && 'id' in body && typeof body.id !== 'string' && typeof body.id !== 'number';
  if (body?.jsonrpc !== '2.0' || typeof body?.error?.code !== 'number' || typeof body?.error?.message !== 'string' || badId) {
    throw new Error(`${res.status} with a body that is not a JSON-RPC error: ${res.text.slice(0, 200)}`);
  }
  return body.error;
}
