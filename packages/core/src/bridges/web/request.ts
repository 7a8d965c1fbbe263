import type { MetadataRequest } from '../../auth/metadata.js';
import type { AuthInfo } from '../../ports/mcp.js';
import type { BodyText, CoreRequest, HeaderMap } from '../../ports/http.js';

/** What a fetch handler is told of the listener it serves (it cannot see its socket). */
export interface Listener {
  localAddress?: string | undefined;
  localPort?: number | undefined;
}

/** A fetch `Request` as the core sees it. */
export function webCoreRequest(request: Request, authInfo: AuthInfo | undefined, listener: Listener): CoreRequest {
  const headers = headerMap(request);
  return {
    method: request.method,
    headers,
    url: addressedUrl(request.url, headers.host as string),
    readBody: (limit) => readWebBody(request, limit),
    authInfo,
    localAddress: listener.localAddress,
    localPort: listener.localPort,
    request,
  };
}

/** What the handler's metadata endpoint needs of a fetch `Request` (see `McpHandler.authMetadataResponse`). */
export function webMetadataRequest(request: Request, listener: Listener = {}): MetadataRequest {
  const url = new URL(request.url);
  return {
    method: request.method,
    path: `${url.pathname}${url.search}`,
    headers: headerMap(request),
    localAddress: listener.localAddress,
    localPort: listener.localPort,
  };
}

/**
 * The URL the client addressed: `request.url` with the host of its `Host` header. `next start`
 * builds `request.url` from the host it listens on (`localhost` for `-H 127.0.0.1`), and the
 * OAuth resource (auth/) is made of this URL: a client refuses one not on its endpoint's origin.
 */
export function addressedUrl(requestUrl: string, host: string | undefined): URL {
  const url = new URL(requestUrl);
  if (host !== undefined && host !== url.host) url.host = host;
  return url;
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
