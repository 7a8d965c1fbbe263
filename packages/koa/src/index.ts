import type { Context, Middleware, Next } from 'koa';
import { handleNodeRequest, METADATA_PATH, nodeMetadataRequest, type AuthInfo, type GetAuthInfo, type McpHandler } from '@mcp-kit/core';

export interface McpKoaOptions {
  /**
   * The only path this middleware answers (compared with `ctx.path`, a trailing `/` ignored);
   * other requests go on to `next()`. Leave it out when a router already matched the path, as in
   * `router.all('/mcp', mcpKoa(handler))`: every request that reaches the middleware is served.
   * Default: none (serve every request).
   */
  path?: string;
  /**
   * Where tool handlers' `extra.authInfo` comes from (sync or async). Default: `ctx.state.auth`, so an auth
   * middleware before this one only has to set `ctx.state.auth = { token, clientId, scopes }`.
   * A session is bound to the principal that created it (`clientId` and `extra.sub`).
   */
  getAuthInfo?: GetAuthInfo<Context>;
}

/**
 * Serves an mcp-kit handler from Koa 2 or 3.
 *
 * Use it as app middleware with a `path` (`app.use(mcpKoa(handler, { path: '/mcp' }))`), or as
 * a route of `@koa/router` without one (`router.all('/mcp', mcpKoa(handler))`).
 *
 * A handler with `auth` (an OAuth resource server) has its Protected Resource Metadata (RFC 9728)
 * served by this middleware too: `GET /.well-known/oauth-protected-resource` and the form suffixed
 * with `path` (with a router, route `/.well-known/oauth-protected-resource/mcp` to it as well).
 *
 * A body that a parser such as `@koa/bodyparser` read before it (`ctx.request.body`) is used as is;
 * without a parser the body is read here, up to `maxBodyBytes`. The response, SSE streams
 * included, is written straight to `ctx.res` (Koa's `ctx.respond` is turned off for it). Protocol
 * errors are answered here with a JSON-RPC error and never reach `app.on('error')`, nor does a
 * client that resets or breaks its connection after the response started (it resumes); only
 * unexpected failures are thrown to Koa's error handling.
 *
 * @example
 * ```ts source="../examples/koa.examples.ts#mcpKoa"
 * const mcp = createMcpHandler({ server: () => buildServer() });
 * app.use(mcpKoa(mcp, { path: '/mcp' }));
 * ```
 */
export function mcpKoa(handler: McpHandler, options: McpKoaOptions = {}): Middleware {
  const path = options.path === undefined ? undefined : trimSlash(options.path);
  const getAuthInfo = options.getAuthInfo ?? ((ctx: Context) => (ctx.state as { auth?: AuthInfo }).auth);
  return async function mcpKitKoa(ctx: Context, next: Next): Promise<void> {
    // A handler with `auth`: its Protected Resource Metadata (RFC 9728), for `path` (auth/ in core).
    if (handler.options.auth && ctx.path.startsWith(METADATA_PATH)) {
      const metadata = handler.authMetadataResponse(nodeMetadataRequest(ctx.req, ctx.originalUrl), path);
      if (!metadata) return next();
      ctx.status = metadata.status;
      ctx.set(metadata.headers);
      ctx.body = metadata.body ?? null;
      return;
    }
    if (path !== undefined && trimSlash(ctx.path) !== path) return next();
    const request = ctx.request as Context['request'] & { body?: unknown; rawBody?: unknown };
    // @koa/bodyparser sets `body = {}` for a content type it skips, leaving the stream unread;
    // only a body whose stream was consumed is the real one.
    const hasParsedBody = request.body !== undefined && (ctx.req.readableEnded || request.rawBody !== undefined);
    const respond = ctx.respond;
    // Koa must not write its own response (a 404 or an empty body) over the one the bridge writes.
    ctx.respond = false;
    // Koa reports any socket error of the response (on-finished) to app.on('error'), whose default
    // prints a stack. Once the bridge has answered, a reset or broken pipe is only the client
    // leaving (it resumes with Last-Event-ID), not the application's failure.
    const onerror = ctx.onerror;
    ctx.onerror = (error) => {
      if (ctx.res.headersSent && isDisconnect(error)) return;
      onerror.call(ctx, error);
    };
    try {
      const auth = getAuthInfo(ctx);
      await handleNodeRequest(handler, ctx.req, ctx.res, {
        parsedBody: request.body,
        hasParsedBody,
        authInfo: auth instanceof Promise ? await auth : auth,
        url: fullUrl(ctx),
      });
    } catch (error) {
      // Nothing was written: hand the response back to Koa so an error middleware can render it.
      if (!ctx.res.headersSent) ctx.respond = respond;
      throw error;
    }
  };
}

const DISCONNECT_CODES = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED', 'ERR_STREAM_PREMATURE_CLOSE', 'ERR_STREAM_DESTROYED']);

function isDisconnect(error: unknown): boolean {
  const code = (error as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' && DISCONNECT_CODES.has(code);
}

function trimSlash(path: string): string {
  return path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
}

/** `ctx.href` honours `app.proxy` (X-Forwarded-Host/Proto); a bad Host header yields no URL. */
function fullUrl(ctx: Context): URL | undefined {
  try {
    return new URL(ctx.href);
  } catch {
    return undefined;
  }
}

export type { McpHandler } from '@mcp-kit/core';
