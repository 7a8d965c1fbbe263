import type { IncomingMessage, ServerResponse } from 'node:http';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import {
  handleNodeRequest,
  METADATA_PATH,
  nodeMetadataRequest,
  type AuthInfo,
  type GetAuthInfo,
  type McpHandler,
  type MetadataResponse,
} from '@mcp-kit/core';

export interface McpExpressOptions {
  /**
   * Where tool handlers' `extra.authInfo` comes from (sync or async). Default: `req.auth`, which the
   * SDK's `requireBearerAuth` middleware sets.
   */
  getAuthInfo?: GetAuthInfo<Request>;
}

/**
 * Serves an mcp-kit handler from Express 4 or 5.
 *
 * Mount it with `app.use('/mcp', mcpExpress(handler))` (requests below the mount path, such as
 * `/mcp/other`, fall through to `next()`), or on a route: `app.all('/mcp', mcpExpress(handler))`.
 * A body that `express.json()` parsed before it is used as is; without a parser the body is read
 * here, up to `maxBodyBytes`. Protocol errors are answered here with a JSON-RPC error; only
 * unexpected failures reach `next(err)`.
 *
 * @example
 * ```ts source="../examples/express.examples.ts#mcpExpress"
 * const mcp = createMcpHandler({ server: () => buildServer() });
 * app.use('/mcp', mcpExpress(mcp));
 * ```
 */
export function mcpExpress(handler: McpHandler, options: McpExpressOptions = {}): RequestHandler {
  const getAuthInfo = options.getAuthInfo ?? ((req: Request) => (req as Request & { auth?: AuthInfo }).auth);
  return function mcpKitExpress(req: Request, res: Response, next: NextFunction): void {
    // Under app.use() the mount path is stripped; anything deeper is not this endpoint.
    if (req.route === undefined && req.path !== '/' && req.path !== '') return next();
    // body-parser marks a body it consumed with `_body`; the raw stream is gone then.
    const parsed = (req as Request & { _body?: boolean })._body === true || (req.body !== undefined && req.readableEnded);
    const serve = (authInfo: AuthInfo | undefined) =>
      handleNodeRequest(handler, req, res, { parsedBody: req.body, hasParsedBody: parsed, authInfo, url: requestUrl(req) });
    const auth = getAuthInfo(req);
    (auth instanceof Promise ? auth.then(serve) : serve(auth)).catch(next);
  };
}

export interface McpFirstOptions {
  /** The MCP endpoint, e.g. `'/mcp'`: requests for exactly this path (a trailing `/` allowed, any query) are MCP's. */
  path: string;
  /**
   * Where tool handlers' `extra.authInfo` comes from. Express middleware does not run for MCP
   * requests here, so verify the token in this function (sync or async). Default: none.
   */
  getAuthInfo?: GetAuthInfo<IncomingMessage>;
}

/**
 * A `node:http` request listener that serves MCP requests at `path` before Express sees them and
 * hands every other request to `app`. Express's router and the prototypes it swaps onto every
 * `req` and `res` cost more CPU per request than all of mcp-kit (the repository's benchmark:
 * a bare handler mounted on Express answers tools/call at half the rate of one on node:http), so a
 * server whose MCP endpoint is busy can take that cost off it. The price: no Express middleware
 * (auth, logging, CORS) runs for MCP requests; do what they did in `getAuthInfo`, or stay with
 * {@link mcpExpress}. A handler with `auth` has its Protected Resource Metadata served here too
 * (see {@link mcpAuthMetadata}), for `path`.
 *
 * @example
 * ```ts source="../examples/express.examples.ts#mcpFirst"
 * const mcp = createMcpHandler({ server: () => buildServer() });
 * const server = http.createServer(mcpFirst(app, mcp, { path: '/mcp' }));
 * server.listen(3000, '127.0.0.1');
 * ```
 */
export function mcpFirst(
  app: (req: IncomingMessage, res: ServerResponse) => void,
  handler: McpHandler,
  options: McpFirstOptions,
): (req: IncomingMessage, res: ServerResponse) => void {
  const path = options.path.length > 1 && options.path.endsWith('/') ? options.path.slice(0, -1) : options.path;
  if (!path.startsWith('/')) throw new TypeError(`mcpFirst: path must start with "/", got ${JSON.stringify(options.path)}`);
  const getAuthInfo = options.getAuthInfo;
  return function mcpFirstListener(req: IncomingMessage, res: ServerResponse): void {
    const url = req.url ?? '/';
    const query = url.indexOf('?');
    const pathname = query < 0 ? url : url.slice(0, query);
    if (pathname !== path && pathname !== `${path}/`) {
      // The handler's Protected Resource Metadata (RFC 9728), when it has `auth`: served here too.
      const metadata = pathname.startsWith(METADATA_PATH) ? handler.authMetadataResponse(nodeMetadataRequest(req), path) : undefined;
      return metadata ? writeMetadata(res, metadata) : app(req, res);
    }
    const serve = (authInfo: AuthInfo | undefined) => handleNodeRequest(handler, req, res, { authInfo, url: listenerUrl(req) });
    const auth = getAuthInfo?.(req);
    const served = auth instanceof Promise ? auth.then(serve) : serve(auth);
    served.catch((error: unknown) => {
      handler.options.onError(error instanceof Error ? error : new Error(String(error)));
      if (res.headersSent) res.end();
      else {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32603, message: 'Internal error' } }));
      }
    });
  };
}

/** Options of {@link mcpAuthMetadata}. */
export interface McpAuthMetadataOptions {
  /**
   * The MCP endpoint's path, e.g. `'/mcp'`: the bare well-known URL describes it, and only it is
   * served suffixed. Default: the path of `auth.resource` if set; otherwise `/mcp` for the bare
   * URL, and any suffix is taken for the endpoint's path.
   */
  path?: string;
}

/**
 * Serves the handler's Protected Resource Metadata (RFC 9728), which MCP clients read to find the
 * authorization server: `GET /.well-known/oauth-protected-resource` and the form suffixed with the
 * MCP path (`/.well-known/oauth-protected-resource/mcp`, what the `401`'s `resource_metadata`
 * names), with CORS for browser clients. Every other request goes on to `next()`. The handler
 * needs the `auth` option. Mount it at the root of the app (the well-known path is the origin's).
 *
 * @example
 * ```ts source="../examples/express.examples.ts#mcpAuthMetadata"
 * const mcp = createMcpHandler({
 *   server: () => buildServer(),
 *   auth: { authorizationServers: [issuer], verifier: jwtVerifier({ issuer }), scopes: ['mcp'] },
 * });
 * app.use(mcpAuthMetadata(mcp));
 * app.use('/mcp', mcpExpress(mcp));
 * ```
 */
export function mcpAuthMetadata(handler: McpHandler, options: McpAuthMetadataOptions = {}): RequestHandler {
  if (!handler.options.auth) throw new TypeError('mcpAuthMetadata: the handler has no `auth` option, so there is no metadata to serve');
  return function mcpKitAuthMetadata(req: Request, res: Response, next: NextFunction): void {
    const metadata = req.path.startsWith(METADATA_PATH)
      ? handler.authMetadataResponse(nodeMetadataRequest(req, req.originalUrl), options.path)
      : undefined;
    if (metadata) writeMetadata(res, metadata);
    else next();
  };
}

function writeMetadata(res: ServerResponse, { status, headers, body }: MetadataResponse): void {
  res.writeHead(status, headers).end(body);
}

/** `extra.requestInfo.url` without Express: the scheme of the socket, the Host header. */
function listenerUrl(req: IncomingMessage): URL | undefined {
  try {
    const scheme = (req.socket as { encrypted?: boolean } | undefined)?.encrypted ? 'https' : 'http';
    return new URL(req.url ?? '/', `${scheme}://${req.headers.host ?? 'localhost'}`);
  } catch {
    return undefined;
  }
}

/** The full URL for `extra.requestInfo.url`; honours `trust proxy` through `req.protocol`. */
function requestUrl(req: Request): URL | undefined {
  try {
    return new URL(req.originalUrl, `${req.protocol}://${req.get('host') ?? 'localhost'}`);
  } catch {
    return undefined;
  }
}

export type { McpHandler } from '@mcp-kit/core';
