import type { IncomingMessage, ServerResponse } from 'node:http';
import type { McpHandler } from '../../handler.js';
import { NodeCoreRequest, type NodeRequestOptions } from './request.js';
import { NodeResponder } from './response.js';

export type { NodeRequestOptions } from './request.js';
export { nodeMetadataRequest } from './request.js';

/**
 * Serves one `node:http` request with the MCP handler. Writes SSE straight to `res` (no
 * buffering), honours backpressure through `maxBufferedBytes`, and notices the client leaving.
 */
export function handleNodeRequest(
  handler: McpHandler,
  req: IncomingMessage,
  res: ServerResponse,
  options: NodeRequestOptions = {},
): Promise<void> {
  return handler.handle(new NodeCoreRequest(req, options), new NodeResponder(res));
}
