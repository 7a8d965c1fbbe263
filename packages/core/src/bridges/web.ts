import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type { McpHandler } from '../handler.js';
import type { BodyText, CoreResponder, SseSink } from '../http/port.js';
import type { HeaderMap } from '../http/rules.js';

export interface FetchHandlerOptions {
  /** Identity for tool handlers' `extra.authInfo`, from the request (e.g. a verified bearer token). */
  getAuthInfo?: (request: Request) => AuthInfo | undefined | Promise<AuthInfo | undefined>;
  /**
   * The server's bind address, when known. With `dnsRebindingProtection: 'auto'` a loopback address
   * turns the Host/Origin check on; a fetch handler cannot see its socket, so say it here.
   */
  localAddress?: string;
}

/** Per-call extras, e.g. from a framework that authenticates before calling the handler. */
export interface FetchCallContext {
  authInfo?: AuthInfo | undefined;
}

export type FetchHandler = (request: Request, context?: FetchCallContext) => Promise<Response>;

const encoder = new TextEncoder();

/** Frames held for the end of the turn are sent early once they add up to this many characters. */
const BATCH_LIMIT = 64 * 1024;
/** The end of this turn of the event loop, where the runtime has setImmediate (Node, Bun, Deno). */
const later: (fn: () => void) => void = typeof setImmediate === 'function' ? (fn) => setImmediate(fn) : (fn) => setTimeout(fn, 0);

/**
 * The web bridge: serves the handler as `(Request) => Promise<Response>`, streaming SSE through a
 * `ReadableStream`. It is what `@mcp-kit/next` uses, and works as is in Hono, Bun, Deno and
 * Workers-style runtimes that keep the process (and so the sessions) alive between requests.
 *
 * @example
 * const fetchHandler = toFetchHandler(createMcpHandler({ server: () => buildServer() }));
 * Bun.serve({ fetch: (req) => fetchHandler(req) });
 */
export function toFetchHandler(handler: McpHandler, options: FetchHandlerOptions = {}): FetchHandler {
  return async (request, context) => {
    const authInfo = context?.authInfo ?? (await options.getAuthInfo?.(request));
    return new Promise<Response>((resolve, reject) => {
      const responder = webResponder(resolve, request.signal);
      handler
        .handle(
          {
            method: request.method,
            headers: headerMap(request),
            url: new URL(request.url),
            readBody: (limit) => readWebBody(request, limit),
            authInfo,
            localAddress: options.localAddress,
          },
          responder,
        )
        .catch(reject);
    });
  };
}

function headerMap(request: Request): HeaderMap {
  const map: HeaderMap = {};
  request.headers.forEach((value, name) => {
    map[name] = value;
  });
  // A Request built by hand (tests, in-process callers) has no Host header; its URL says it.
  map.host ??= new URL(request.url).host;
  return map;
}

function webResponder(resolve: (response: Response) => void, signal: AbortSignal): CoreResponder {
  return {
    send(status, headers, body) {
      resolve(new Response(status === 202 || status === 204 ? null : (body ?? null), { status, headers }));
    },
    stream(headers): SseSink {
      let controller!: ReadableStreamDefaultController<Uint8Array>;
      let closed = false;
      /** Waits for the reader to take everything queued (see onDrain). */
      let drainListener: (() => void) | undefined;
      const listeners: Array<() => void> = [];
      const markClosed = () => {
        if (closed) return;
        closed = true;
        signal.removeEventListener('abort', onAbort);
        for (const l of listeners) l();
        listeners.length = 0;
      };
      // The client left: stop writing, and end the body in case the host does not cancel it.
      const onAbort = () => {
        markClosed();
        try {
          controller.close();
        } catch {
          // Already cancelled by the consumer.
        }
      };
      // A high-water mark of 0 makes desiredSize = -(bytes queued), i.e. what the peer hasn't taken.
      const body = new ReadableStream<Uint8Array>(
        {
          start(c) {
            controller = c;
          },
          // With a high-water mark of 0 the stream pulls when the reader asks and nothing is queued.
          pull() {
            const listener = drainListener;
            drainListener = undefined;
            listener?.();
          },
          cancel: markClosed,
        },
        { highWaterMark: 0, size: (chunk) => chunk.byteLength },
      );
      signal.addEventListener('abort', onAbort);
      resolve(new Response(body, { status: 200, headers }));
      // A client that left while the request was being read never fires 'abort' again.
      if (signal.aborted) onAbort();
      // What one turn of the event loop writes (the priming event and a quick answer; a run of
      // notifications) becomes one chunk at the end of the turn: the host's stream plumbing costs
      // per chunk, and one encode of many frames is cheaper than one per frame.
      let pending = '';
      let scheduled = false;
      const send = (): void => {
        scheduled = false;
        if (closed || pending === '') return;
        const chunk = pending;
        pending = '';
        controller.enqueue(encoder.encode(chunk));
      };
      return {
        write(chunk) {
          if (closed) return false;
          pending += chunk;
          if (pending.length >= BATCH_LIMIT) send();
          else if (!scheduled) {
            scheduled = true;
            later(send);
          }
          return (controller.desiredSize ?? 0) >= 0;
        },
        end() {
          if (closed) return;
          send();
          markClosed();
          try {
            controller.close();
          } catch {
            // Already cancelled by the consumer.
          }
        },
        get bufferedBytes() {
          // Frames held for the end of the turn count: a client that stops reading is seen either way.
          return closed ? 0 : pending.length - (controller.desiredSize ?? 0);
        },
        onClose(listener) {
          if (closed) listener();
          else listeners.push(listener);
        },
        onDrain(listener) {
          send();
          if (closed || (controller.desiredSize ?? 0) >= 0) later(listener);
          else drainListener = listener;
        },
      };
    },
  };
}

async function readWebBody(request: Request, limit: number): Promise<BodyText> {
  const declared = Number(request.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > limit) return { ok: false, tooLarge: true };
  if (!request.body) return { ok: true, text: '' };
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > limit) {
        await reader.cancel().catch(() => {});
        return { ok: false, tooLarge: true };
      }
      chunks.push(value);
    }
  } catch (error) {
    return { ok: false, tooLarge: false, error: error instanceof Error ? error : new Error(String(error)) };
  }
  const all = new Uint8Array(size);
  let offset = 0;
  for (const c of chunks) {
    all.set(c, offset);
    offset += c.byteLength;
  }
  return { ok: true, text: new TextDecoder().decode(all) };
}
