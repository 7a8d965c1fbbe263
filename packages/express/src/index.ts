import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { handleNodeRequest, type McpHandler } from '@mcp-kit/core';

export interface McpExpressOptions {
  /**
   * Where tool handlers' `extra.authInfo` comes from. Default: `req.auth`, which the SDK's
   * `requireBearerAuth` middleware sets.
   */
  getAuthInfo?: (req: Request) => AuthInfo | undefined;
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
 * const mcp = createMcpHandler({ server: () => buildServer() });
 * app.use('/mcp', mcpExpress(mcp));
 */
export function mcpExpress(handler: McpHandler, options: McpExpressOptions = {}): RequestHandler {
  const getAuthInfo = options.getAuthInfo ?? ((req: Request) => (req as Request & { auth?: AuthInfo }).auth);
  return function mcpKitExpress(req: Request, res: Response, next: NextFunction): void {
    // Under app.use() the mount path is stripped; anything deeper is not this endpoint.
    if (req.route === undefined && req.path !== '/' && req.path !== '') return next();
    // body-parser marks a body it consumed with `_body`; the raw stream is gone then.
    const parsed = (req as Request & { _body?: boolean })._body === true || (req.body !== undefined && req.readableEnded);
    handleNodeRequest(handler, req, res, {
      parsedBody: req.body,
      hasParsedBody: parsed,
      authInfo: getAuthInfo(req),
      url: requestUrl(req),
    }).catch(next);
  };
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
