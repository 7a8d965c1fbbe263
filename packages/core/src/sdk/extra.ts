import type { AuthInfo } from '../ports/mcp.js';
import type { MessageExtraInfo } from '../ports/mcp.js';
import type { HeaderMap } from '../ports/http.js';

/** Per-request context the core passes in from the HTTP layer. */
export interface Inbound {
  headers: HeaderMap;
  url?: URL | undefined;
  authInfo?: AuthInfo | undefined;
  /** The fetch `Request`, when the request came through the web bridge. */
  request?: Request | undefined;
}

/**
 * What a request handler of either SDK major reads off the request. SDK v1 reads `requestInfo`
 * (`extra.requestInfo.headers`), SDK v2 a fetch `Request` (`ctx.http.req`); the node bridge has
 * no `Request`, so v2 gets this view, which builds its `Headers` only when a handler reads them.
 */
export class RequestView {
  private built: Headers | undefined;

  constructor(
    readonly method: string,
    private readonly map: HeaderMap,
    private readonly target: URL | undefined,
  ) {}

  get url(): string {
    return this.target?.href ?? '';
  }

  get headers(): Headers {
    if (this.built) return this.built;
    const headers = new Headers();
    for (const [name, value] of Object.entries(this.map)) {
      if (value === undefined) continue;
      if (Array.isArray(value)) for (const v of value) headers.append(name, v);
      else headers.set(name, value);
    }
    return (this.built = headers);
  }
}

/** A close hook a request's handler gets; it returns whether it closed anything. */
export type CloseHook = (retryMs?: number) => boolean;

/**
 * The per-message `extra` both SDK majors accept from a transport: v1 hands `requestInfo`,
 * `authInfo` and the close hooks to `RequestHandlerExtra`; v2 turns `request`, `authInfo` and the
 * close hooks into `ctx.http` (`req`, `authInfo`, `closeSSE`, `closeStandaloneSSE`). The hooks are
 * passed through as they are, so `closeSSEStream(ctx, retryMs)` reaches them with its retry.
 */
export function messageExtra(
  inbound: Inbound,
  requestInfo: MessageExtraInfo['requestInfo'],
  forV2: boolean,
  closeSSEStream?: CloseHook,
  closeStandaloneSSEStream?: CloseHook,
): MessageExtraInfo {
  const extra: MessageExtraInfo = { authInfo: inbound.authInfo, requestInfo };
  if (forV2) extra.request = inbound.request ?? requestView(inbound);
  if (closeSSEStream) extra.closeSSEStream = closeSSEStream;
  if (closeStandaloneSSEStream) extra.closeStandaloneSSEStream = closeStandaloneSSEStream;
  return extra;
}

/** `requestInfo` for SDK v1 handlers: one object per HTTP request, shared by its messages. */
export function requestInfoOf(inbound: Inbound): MessageExtraInfo['requestInfo'] {
  return { headers: inbound.headers as Record<string, string | string[] | undefined>, url: inbound.url } as MessageExtraInfo['requestInfo'];
}

function requestView(inbound: Inbound): Request {
  return new RequestView('POST', inbound.headers, inbound.url) as unknown as Request;
}
