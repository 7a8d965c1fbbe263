import type { AuthInfo } from '../../ports/mcp.js';
import type { McpHandler } from '../../handler.js';
import type { GetAuthInfo } from '../../ports/http.js';
import { METADATA_PATH } from '../../auth/metadata.js';
import { webCoreRequest, webMetadataRequest } from './request.js';

export { webMetadataRequest } from './request.js';
import { WebResponder } from './response.js';

export interface FetchHandlerOptions {
  /** Identity for tool handlers' `extra.authInfo`, from the request (e.g. a verified bearer token). */
  getAuthInfo?: GetAuthInfo<Request>;
  /**
   * The server's bind address, when known. With `dnsRebindingProtection: 'auto'` a loopback address
   * turns the Host/Origin check on; a fetch handler cannot see its socket, so say it here.
   */
  localAddress?: string;
  /**
   * The port the server listens on, when known. A handler with `auth` but no `auth.resource`
   * serves a loopback listener only, whose resource is made of this port and `localAddress`
   * (never of the `Host` header's port): without both it refuses every request.
   */
  localPort?: number;
  /**
   * The platform's `waitUntil`, called for each call and task that may outlive its response (see
   * the handler's `waitUntil` option), e.g. `after` from `next/server`. A call context's wins.
   */
  waitUntil?: (work: Promise<void>) => void;
}

/** Per-call extras, e.g. from a framework that authenticates before calling the handler. */
export interface FetchCallContext {
  authInfo?: AuthInfo | undefined;
  /** This request's `waitUntil` (Cloudflare: `(work) => ctx.waitUntil(work)`). */
  waitUntil?: ((work: Promise<void>) => void) | undefined;
}

export type FetchHandler = (request: Request, context?: FetchCallContext) => Promise<Response>;

/**
 * The web bridge: serves the handler as `(Request) => Promise<Response>`, streaming SSE through a
 * `ReadableStream`. It is what `@mcp-kit/next` uses, and works as is in Hono, Bun, Deno and
 * Workers-style runtimes that keep the process (and so the sessions) alive between requests.
 * A handler with `auth` also answers `GET /.well-known/oauth-protected-resource/<path>` (and the
 * bare form) with its Protected Resource Metadata.
 *
 * @example
 * ```ts source="../../../examples/core.examples.ts#toFetchHandler"
 * const fetchHandler = toFetchHandler(createMcpHandler({ server: () => buildServer() }));
 * Bun.serve({ fetch: (req) => fetchHandler(req) });
 * ```
 */
export function toFetchHandler(handler: McpHandler, options: FetchHandlerOptions = {}): FetchHandler {
  return async function mcpFetchHandler(request, context) {
    // A handler with `auth` answers for its Protected Resource Metadata (RFC 9728) too.
    if (handler.options.auth && request.url.includes(METADATA_PATH)) {
      const metadata = handler.authMetadataResponse(webMetadataRequest(request, options));
      if (metadata) return new Response(metadata.body ?? null, { status: metadata.status, headers: metadata.headers });
    }
    const authInfo = context?.authInfo ?? (await options.getAuthInfo?.(request));
    return new Promise<Response>((resolve, reject) => {
      const req = webCoreRequest(request, authInfo, options);
      req.waitUntil = context?.waitUntil ?? options.waitUntil;
      handler.handle(req, new WebResponder(resolve, request.signal)).catch(reject);
    });
  };
}
