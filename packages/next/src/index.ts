import { toFetchHandler, webMetadataRequest, type GetAuthInfo, type McpHandler } from '@mcp-kit/core';
import { cacheKey } from './cache.js';

export interface McpNextOptions {
  /**
   * Where tool handlers' `extra.authInfo` comes from. Verify the token here (or read what your
   * middleware verified) and return `undefined` for anonymous requests. Default: none.
   *
   * @example
   * ```ts source="../examples/next.examples.ts#getAuthInfo"
   * getAuthInfo: async (req) => {
   *   const token = req.headers.get('authorization')?.replace(/^Bearer /i, '');
   *   return token ? await verifyToken(token) : undefined; // → { token, clientId, scopes, extra }
   * },
   * ```
   */
  getAuthInfo?: GetAuthInfo<Request>;
  /**
   * The address the server listens on, e.g. `'127.0.0.1'`. A route handler cannot see its socket,
   * so `dnsRebindingProtection: 'auto'` only turns on when this is a loopback address; or set
   * `dnsRebindingProtection: true` on the handler. Default: unknown.
   */
  localAddress?: string;
  /**
   * The port the server listens on (`next start -p`). A handler with `auth` and no
   * `auth.resource` serves a loopback listener only, whose resource is made of `localAddress`
   * and this port, never of the `Host` header. Default: unknown.
   */
  localPort?: number;
  /**
   * Keeps a serverless function alive while a call whose stream the tool closed, or a task, still
   * runs: Next's `after` by default (Next 15.1+, where `next/server` has it; not when the handler
   * has a `waitUntil` of its own), or pass your own (`waitUntil` from `@vercel/functions`), or
   * `false` for none. Set `maxCallDurationMs` on the handler below the route's `maxDuration`. (On
   * `next start` the process lives on anyway.)
   */
  waitUntil?: ((work: Promise<void>) => void) | false;
}

/** A Next.js App Router route handler. */
export type McpRouteHandler = (request: Request) => Promise<Response>;

/** What `app/mcp/route.ts` exports. */
export interface McpRouteHandlers {
  GET: McpRouteHandler;
  POST: McpRouteHandler;
  DELETE: McpRouteHandler;
  /** Answers `405` with a JSON-RPC error body and `Allow`; without it Next answers an empty `405`. */
  PUT: McpRouteHandler;
  /** As {@link McpRouteHandlers.PUT}. */
  PATCH: McpRouteHandler;
}

/**
 * Serves an mcp-kit handler from a Next.js App Router route. SSE goes out through the web bridge's
 * `ReadableStream`, event by event; a client that disconnects aborts `request.signal` and the
 * stream, and resumes with `GET` + `Last-Event-ID`. Sessions live in the Node.js server process,
 * so create the handler with {@link getOrCreate} to keep them across dev-mode reloads.
 *
 * @example
 * ```ts source="../examples/next.examples.ts#mcpNext"
 * // app/mcp/route.ts
 * const mcp = getOrCreate('mcp', () =>
 *   createMcpHandler({
 *     server: () => buildServer(),
 *     maxStreamDurationMs: 50_000, // close streams before the platform's 60 s limit; clients resume
 *   }),
 * );
 * export const { GET, POST, DELETE, PUT, PATCH } = mcpNext(mcp);
 * export const runtime = 'nodejs'; // sessions and streams need the Node.js runtime
 * export const dynamic = 'force-dynamic'; // never prerender or cache an MCP endpoint
 * ```
 */
export function mcpNext(handler: McpHandler, options: McpNextOptions = {}): McpRouteHandlers {
  // Next's `after` unless told otherwise, or the handler has a `waitUntil` of its own.
  const { waitUntil = handler.options.waitUntil ? false : nextAfter, ...rest } = options;
  const fetchHandler = toFetchHandler(handler, { ...rest, ...(waitUntil === false ? {} : { waitUntil }) });
  // Next passes `{ params }` as the second argument; keep it away from the bridge's call context.
  const route: McpRouteHandler = (request) => fetchHandler(request);
  return { GET: route, POST: route, DELETE: route, PUT: route, PATCH: route };
}

/** Options of {@link mcpNextAuthMetadata}. */
export interface McpNextAuthMetadataOptions {
  /** The MCP route's path. Default: the path of `auth.resource` if set, else `/mcp`. */
  path?: string;
  /** As {@link McpNextOptions.localAddress}: where the server listens, for a handler without `auth.resource`. */
  localAddress?: string;
  /** As {@link McpNextOptions.localPort}. */
  localPort?: number;
}

/** What `app/.well-known/oauth-protected-resource/[[...path]]/route.ts` exports. */
export interface McpAuthMetadataRoutes {
  GET: McpRouteHandler;
  HEAD: McpRouteHandler;
  OPTIONS: McpRouteHandler;
}

/**
 * Serves a handler's Protected Resource Metadata (RFC 9728), which MCP clients read to find the
 * authorization server, from an optional catch-all route: the bare
 * `/.well-known/oauth-protected-resource` and the form suffixed with the MCP route's path (what
 * the `401`'s `resource_metadata` names). The handler needs the `auth` option; other paths under
 * the route answer 404.
 *
 * @example
 * ```ts source="../examples/auth-metadata.examples.ts#mcpNextAuthMetadata"
 * // app/.well-known/oauth-protected-resource/[[...path]]/route.ts
 * export const { GET, OPTIONS } = mcpNextAuthMetadata(mcp);
 * export const dynamic = 'force-dynamic';
 * ```
 */
export function mcpNextAuthMetadata(handler: McpHandler, options: McpNextAuthMetadataOptions = {}): McpAuthMetadataRoutes {
  if (!handler.options.auth) throw new TypeError('mcpNextAuthMetadata: the handler has no `auth` option, so there is no metadata to serve');
  const path = options.path ?? '/mcp';
  const route: McpRouteHandler = async function mcpAuthMetadataRoute(request) {
    const metadata = handler.authMetadataResponse(webMetadataRequest(request, options), path);
    if (metadata) return new Response(metadata.body ?? null, { status: metadata.status, headers: metadata.headers });
    const error = { jsonrpc: '2.0', error: { code: -32000, message: 'Not Found: no protected resource metadata here' } };
    return new Response(JSON.stringify(error), { status: 404, headers: { 'content-type': 'application/json' } });
  };
  return { GET: route, HEAD: route, OPTIONS: route };
}

/** Next's own `after`, once `next/server` is loaded (`undefined` before 15.1, or outside Next). */
let after: ((work: Promise<void>) => void) | undefined;
void import('next/server' as string).then(
  (module: { after?: unknown }) => {
    if (typeof module.after === 'function') after = module.after as (work: Promise<void>) => void;
  },
  () => {}, // not in a Next app: there is no `after` to default to
);

/**
 * The default `waitUntil`: Next's `after`, when this Next has it and the call comes within a
 * request (it throws outside one, e.g. a handler called by a test: then nothing is registered).
 */
function nextAfter(work: Promise<void>): void {
  if (!after) return;
  try {
    after(work);
  } catch (error) {
    // Outside a request scope there is nothing to keep alive; anything else reaches onError.
    if (!String((error as Error)?.message).includes('outside a request scope')) throw error;
  }
}

/**
 * Returns the value cached on `globalThis` under `name`, creating it on first use. `next dev`
 * re-evaluates route modules on every edit, and a route's bundle may hold its own copy of a module;
 * a process-wide cache keeps one handler, and so one set of sessions, per server process.
 * In dev, a cached handler keeps its original `server` factory: restart to pick up tool changes.
 */
export function getOrCreate<T>(name: string, create: () => T): T {
  const cache = globalThis as unknown as Record<symbol, T | undefined>;
  return (cache[cacheKey(name)] ??= create());
}

export type { McpHandler } from '@mcp-kit/core';
export { toFetchHandler } from '@mcp-kit/core';
export type { FetchHandler, FetchHandlerOptions, GetAuthInfo } from '@mcp-kit/core';
