import type { AuthInfo } from './mcp.js';

/** Lower-cased header map, as Node gives it. */
export type HeaderMap = Record<string, string | string[] | undefined>;

/**
 * What an adapter hands the core: a framework request reduced to what MCP needs. Bridges build it
 * (the node bridge from `IncomingMessage`, the web bridge from `Request`).
 */
export interface CoreRequest {
  method: string;
  /** Lower-cased header names. */
  headers: HeaderMap;
  /** Full URL if known (passed to handlers as `requestInfo.url`). */
  url?: URL | undefined;
  /** A body a framework already parsed (express.json(), koa bodyparser). */
  parsedBody?: unknown;
  hasParsedBody?: boolean;
  /** Reads the raw body as text, refusing more than `limit` bytes. */
  readBody(limit: number): Promise<BodyText>;
  /** Identity from the framework's auth middleware; reaches tool handlers as `extra.authInfo`. */
  authInfo?: AuthInfo | undefined;
  /** Local address of the socket; a loopback address turns DNS-rebinding protection on (`'auto'`). */
  localAddress?: string | undefined;
  /** Local port of the socket: without `auth.resource`, a loopback listener's resource is made of it. */
  localPort?: number | undefined;
  /** The connection itself is TLS (the socket's, never a forwarding header's say-so). */
  tls?: boolean | undefined;
  /** The client's address, when the bridge knows it (`maxSessionsPerPrincipal` counts anonymous clients by it). */
  remoteAddress?: string | undefined;
  /** The fetch `Request` itself, when the bridge has one (SDK v2 handlers read it as `ctx.http.req`). */
  request?: Request | undefined;
  /** The platform's `waitUntil` for this request (Cloudflare's `ctx.waitUntil`); wins over the handler's `waitUntil` option. */
  waitUntil?: ((work: Promise<void>) => void) | undefined;
}

export type BodyText = { ok: true; text: string } | { ok: false; tooLarge: true } | { ok: false; tooLarge: false; error: Error };

export type OutHeaders = Record<string, string>;

/** How the core answers: a complete response, or an SSE stream it writes frames to. */
export interface CoreResponder {
  send(status: number, headers: OutHeaders, body: string | undefined): void;
  stream(headers: OutHeaders): SseSink;
  /**
   * Optional: calls `listener` once the exchange is over, answered or not (the client may have
   * left first). A 2026-era request whose client left before its answer is cancelled.
   */
  onClose?(listener: () => void): void;
  /**
   * Optional: tells the sender, before anything of the request runs, that it was taken (an
   * informational `102 Processing` on `node:http`; a fetch runtime cannot send one). Sent only to
   * a peer that forwarded a request answered with one JSON body: a connection that breaks
   * before it broke before anything ran (see `SessionOwners.forward`).
   */
  acknowledge?(): void;
}

/**
 * One open SSE response. The bridge implements it over `res.write` (Node) or a ReadableStream
 * controller (web).
 */
export interface SseSink {
  /** Writes a chunk; `false` means the bridge is buffering (the peer reads slower than we write). */
  write(chunk: string): boolean;
  end(): void;
  /** Bytes the bridge holds that the peer has not taken yet. */
  readonly bufferedBytes: number;
  /** Called once when the peer goes away or the stream ends. */
  onClose(listener: () => void): void;
  /**
   * Calls `listener` once the peer has taken what the sink holds (sends what it batches first).
   * Lets a replay wait for a slow reader instead of hanging up on it; a sink without it makes a
   * backlog larger than `maxBufferedBytes` come back over several connections.
   */
  onDrain?(listener: () => void): void;
  /** Optional: sends what the sink batches for the end of this turn (the response head with it) to the peer now. */
  sendNow?(): void;
}

/**
 * Where tool handlers' `authInfo` comes from, for one framework's request type (Express `Request`,
 * Koa `Context`, fetch `Request`, `IncomingMessage`): verify the credentials here, or read what an
 * auth middleware verified; `undefined` for an anonymous request. May be async.
 */
export type GetAuthInfo<Req> = (req: Req) => AuthInfo | undefined | Promise<AuthInfo | undefined>;
