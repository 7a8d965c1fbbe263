import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type { McpHandler } from '../handler.js';
import type { BodyText, CoreResponder, SseSink } from '../http/port.js';

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
export function handleNodeRequest(handler: McpHandler, req: IncomingMessage, res: ServerResponse, options: NodeRequestOptions = {}): Promise<void> {
  return handler.handle(
    {
      method: req.method ?? 'GET',
      headers: req.headers,
      url: options.url,
      parsedBody: options.parsedBody,
      hasParsedBody: options.hasParsedBody ?? false,
      readBody: (limit) => readNodeBody(req, limit),
      authInfo: options.authInfo,
      localAddress: req.socket?.localAddress,
    },
    nodeResponder(res),
  );
}

/** Frames held for the end of the turn are sent early once they add up to this many characters. */
const BATCH_LIMIT = 64 * 1024;

export function nodeResponder(res: ServerResponse): CoreResponder {
  return {
    send(status, headers, body) {
      if (res.headersSent) {
        res.end();
        return;
      }
      res.writeHead(status, headers);
      res.end(body);
    },
    stream(headers): SseSink {
      res.writeHead(200, headers);
      // Small SSE frames should leave now, not wait for Nagle.
      res.socket?.setNoDelay(true);
      // Compression middleware buffers unless asked to flush.
      const flushable = res as ServerResponse & { flush?: () => void };
      const flush = typeof flushable.flush === 'function' ? () => flushable.flush!() : undefined;
      // What one turn of the event loop writes (the priming event and a quick answer; a run of
      // notifications) leaves with the headers as one chunk when the turn ends, instead of one
      // res.write, chunk header and syscall per frame.
      let pending = '';
      let scheduled = false;
      let started = false;
      let ended = false;
      const send = (): void => {
        scheduled = false;
        if (res.writableEnded || res.destroyed) {
          pending = '';
          return;
        }
        if (pending === '') {
          // (`headersSent` is already true after writeHead: it says rendered, not sent.)
          if (!started) res.flushHeaders();
          started = true;
          return;
        }
        started = true;
        const chunk = pending;
        pending = '';
        res.write(chunk);
        flush?.();
      };
      const schedule = (): void => {
        if (scheduled) return;
        scheduled = true;
        setImmediate(send);
      };
      // The headers go out at the end of this turn even when nothing is written in it.
      schedule();
      return {
        write(chunk) {
          // A local flag, not res.writableEnded/destroyed: Express swaps the prototype of every
          // res, which makes each property read on it slow, and this runs once per frame.
          // (SseConnection stops writing when res closes; send() checks res once per turn.)
          if (ended) return false;
          pending += chunk;
          if (pending.length >= BATCH_LIMIT) send();
          else schedule();
          return !res.writableNeedDrain;
        },
        end() {
          ended = true;
          const chunk = pending;
          pending = '';
          if (chunk !== '' && !res.writableEnded && !res.destroyed) res.end(chunk);
          else res.end();
        },
        get bufferedBytes() {
          // Frames held for the end of the turn count: a client that stops reading is seen either way.
          return res.writableLength + pending.length;
        },
        onClose(listener) {
          // A client that left before the stream opened has already fired 'close'.
          if (res.closed || res.destroyed) listener();
          else res.once('close', listener);
        },
        onDrain(listener) {
          // What waits for the end of the turn goes to the socket now, so 'drain' can follow it.
          if (pending !== '') send();
          if (res.writableNeedDrain) res.once('drain', listener);
          else setImmediate(listener);
        },
      };
    },
  };
}

function readNodeBody(req: IncomingMessage, limit: number): Promise<BodyText> {
  // Another middleware consumed the stream without leaving a body: waiting for 'end' would hang.
  if (req.readableEnded) {
    return Promise.resolve({ ok: false, tooLarge: false, error: new Error('the request body was already read by another middleware; put a JSON body parser before mcp-kit, or none') });
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
    const onEnd = () => finish({ ok: true, text: chunks.length === 1 ? (chunks[0] as Buffer).toString('utf8') : Buffer.concat(chunks).toString('utf8') });
    const onError = (error: Error) => finish({ ok: false, tooLarge: false, error });
    req.on('data', onData).on('end', onEnd).on('error', onError);
  });
}
