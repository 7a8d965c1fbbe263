import type { IncomingMessage } from 'node:http';
import type { AuthInfo } from '../../ports/mcp.js';
import type { MetadataRequest } from '../../auth/metadata.js';
import type { BodyText, CoreRequest } from '../../ports/http.js';

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

/** A `node:http` request as the core sees it; one object per request, no closures. */
export class NodeCoreRequest implements CoreRequest {
  readonly method: string;
  readonly headers: IncomingMessage['headers'];
  readonly parsedBody: unknown;
  readonly hasParsedBody: boolean;
  /** Replaced by the verified identity when the handler has `auth`. */
  authInfo: AuthInfo | undefined;
  readonly localAddress: string | undefined;
  readonly localPort: number | undefined;
  readonly tls: boolean;
  readonly remoteAddress: string | undefined;
  private given: URL | undefined;

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
    this.localPort = req.socket?.localPort;
    this.tls = isTls(req);
    this.remoteAddress = req.socket?.remoteAddress;
    this.given = options.url;
  }

  /** The URL the adapter gave, else one from the Host header, built only when read (the resource server names it: auth/). */
  get url(): URL | undefined {
    return (this.given ??= urlOf(this.req));
  }

  readBody(limit: number): Promise<BodyText> {
    return readNodeBody(this.req, limit);
  }
}

function urlOf(req: IncomingMessage): URL | undefined {
  const host = req.headers.host;
  if (host === undefined || req.url === undefined || !URL.canParse(req.url, `http://${host}`)) return undefined;
  return new URL(req.url, `${isTls(req) ? 'https' : 'http'}://${host}`);
}

/** Whether the request came over TLS: the socket's own word (an `https` server), not a header's. */
function isTls(req: IncomingMessage): boolean {
  return (req.socket as { encrypted?: boolean } | undefined)?.encrypted === true;
}

/**
 * What the handler's metadata endpoint needs of a `node:http` request (see
 * `McpHandler.authMetadataResponse`): `path` is its full path when a framework rewrote `req.url`
 * (Express's `originalUrl` under a mount path).
 */
export function nodeMetadataRequest(req: IncomingMessage, path = req.url ?? '/'): MetadataRequest {
  return {
    method: req.method ?? 'GET',
    path,
    headers: req.headers,
    localAddress: req.socket?.localAddress,
    localPort: req.socket?.localPort,
    tls: isTls(req),
  };
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
