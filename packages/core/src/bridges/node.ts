import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type { McpHandler } from '../handler.js';
import type { BodyText, CoreRequest, CoreResponder, OutHeaders, SseSink } from '../http/port.js';

/** What an adapter on `node:http` (Express, Koa, plain http) knows beyond `req`/`res`. */
export interface NodeRequestOptions {
  /** The body a framework's parser already produced; see `hasParsedBody`. */
  parsedBody?: unknown;
  /** True when `parsedBody` is the request's body (the stream has been consumed). */
  hasParsedBody?: boolean;
  /** Identity to pass to tool handlers as `extra.authInfo`. */
  authInfo?: AuthInfo | undefined;
  /** The request's full URL, if the framework knows it better than `req.url`. */
  url?: URL | undefined;
}

/**
 * Serves one `node:http` request with the MCP handler. Writes SSE straight to `res` (no
 * buffering), honours backpressure through `maxBufferedBytes`, and notices the client leaving.
 */
export function handleNodeRequest(
  handler: McpHandler,
  req: IncomingMessage,
  res: ServerResponse,
  options: NodeRequestOptions = {},
): Promise<void> {
  return handler.handle(new NodeCoreRequest(req, options), new NodeResponder(res));
}

/** A `node:http` request as the core sees it; one object per request, no closures. */
class NodeCoreRequest implements CoreRequest {
  readonly method: string;
  readonly headers: IncomingMessage['headers'];
  readonly parsedBody: unknown;
  readonly hasParsedBody: boolean;
  readonly authInfo: AuthInfo | undefined;
  readonly localAddress: string | undefined;
  readonly url: URL | undefined;

  constructor(
    private readonly req: IncomingMessage,
    options: NodeRequestOptions,
  ) {
    this.method = req.method ?? 'GET';
    this.headers = req.headers;
    this.parsedBody = options.parsedBody;
    this.hasParsedBody = options.hasParsedBody ?? false;
    this.authInfo = options.authInfo;
    this.localAddress = req.socket?.localAddress;
    this.url = options.url;
  }

  readBody(limit: number): Promise<BodyText> {
    return readNodeBody(this.req, limit);
  }
}

/** Frames held for the end of the turn are sent early once they add up to this many characters. */
const BATCH_LIMIT = 64 * 1024;

export function nodeResponder(res: ServerResponse): CoreResponder {
  return new NodeResponder(res);
}

class NodeResponder implements CoreResponder {
  constructor(private readonly res: ServerResponse) {}

  send(status: number, headers: OutHeaders, body: string | undefined): void {
    const res = this.res;
    if (res.headersSent) {
      res.end();
      return;
    }
    res.writeHead(status, headers);
    res.end(body);
  }

  stream(headers: OutHeaders): SseSink {
    this.res.writeHead(200, headers);
    // Small SSE frames should leave now, not wait for Nagle.
    this.res.socket?.setNoDelay(true);
    return new NodeSseSink(this.res);
  }
}

/**
 * One SSE response on `node:http`. What one turn of the event loop writes (the priming event and a
 * quick answer; a run of notifications) leaves with the headers as one chunk when the turn ends,
 * instead of one res.write, chunk header and syscall per frame.
 */
class NodeSseSink implements SseSink {
  private pending = '';
  private scheduled = false;
  private started = false;
  // A local flag, not res.writableEnded/destroyed: Express swaps the prototype of every res, which
  // makes each property read on it slow, and write() runs once per frame. (SseConnection stops
  // writing when res closes; send() checks res once per turn.)
  private ended = false;
  /** Compression middleware buffers unless asked to flush. */
  private readonly flushable: boolean;
  /**
   * False once `res.writableLength` was seen at 0 after our last write: only our own writes add
   * to it, so it stays 0 until the next one and the per-frame checks need not read it (each read
   * is a chain of getters, slow on Express's `res`). Compression writes later than we do, so with
   * it we always read.
   */
  private queued = true;

  constructor(private readonly res: ServerResponse) {
    this.flushable = typeof (res as ServerResponse & { flush?: unknown }).flush === 'function';
    // The headers go out at the end of this turn even when nothing is written in it.
    this.schedule();
  }

  write(chunk: string): boolean {
    if (this.ended) return false;
    this.pending += chunk;
    if (this.pending.length >= BATCH_LIMIT) this.send();
    else this.schedule();
    return !this.nodeBuffered() || !this.res.writableNeedDrain;
  }

  end(): void {
    this.ended = true;
    const res = this.res;
    const chunk = this.pending;
    this.pending = '';
    if (chunk !== '' && !res.writableEnded && !res.destroyed) res.end(chunk);
    else res.end();
  }

  get bufferedBytes(): number {
    // Frames held for the end of the turn count: a client that stops reading is seen either way.
    return (this.nodeBuffered() ? this.res.writableLength : 0) + this.pending.length;
  }

  /** Whether node:http may hold bytes of ours that the socket has not taken. */
  private nodeBuffered(): boolean {
    if (this.queued && !this.flushable && this.res.writableLength === 0) this.queued = false;
    return this.queued;
  }

  onClose(listener: () => void): void {
    const res = this.res;
    // A client that left before the stream opened has already fired 'close'.
    if (res.closed || res.destroyed) listener();
    else res.once('close', listener);
  }

  onDrain(listener: () => void): void {
    // What waits for the end of the turn goes to the socket now, so 'drain' can follow it.
    if (this.pending !== '') this.send();
    if (this.res.writableNeedDrain) this.res.once('drain', listener);
    else setImmediate(listener);
  }

  send(): void {
    this.scheduled = false;
    const res = this.res;
    if (res.writableEnded || res.destroyed) {
      this.pending = '';
      return;
    }
    if (this.pending === '') {
      // (`headersSent` is already true after writeHead: it says rendered, not sent.)
      if (!this.started) {
        res.flushHeaders();
        this.queued = true;
      }
      this.started = true;
      return;
    }
    this.started = true;
    const chunk = this.pending;
    this.pending = '';
    res.write(chunk);
    this.queued = true;
    if (this.flushable) (res as ServerResponse & { flush(): void }).flush();
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(sendPending, this);
  }
}

function sendPending(sink: NodeSseSink): void {
  sink.send();
}

function readNodeBody(req: IncomingMessage, limit: number): Promise<BodyText> {
  // Another middleware consumed the stream without leaving a body: waiting for 'end' would hang.
  if (req.readableEnded) {
    return Promise.resolve({
      ok: false,
      tooLarge: false,
      error: new Error('the request body was already read by another middleware; put a JSON body parser before mcp-kit, or none'),
    });
  }
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) return Promise.resolve({ ok: false, tooLarge: true });
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    const finish = (result: BodyText) => {
      if (done) return;
      done = true;
      req.off('data', onData).off('end', onEnd).off('error', onError);
      resolve(result);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        // Stop buffering; let the rest of the body drain so the 413 can be read.
        req.resume();
        finish({ ok: false, tooLarge: true });
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () =>
      finish({ ok: true, text: chunks.length === 1 ? (chunks[0] as Buffer).toString('utf8') : Buffer.concat(chunks).toString('utf8') });
    const onError = (error: Error) => finish({ ok: false, tooLarge: false, error });
    req.on('data', onData).on('end', onEnd).on('error', onError);
  });
}
