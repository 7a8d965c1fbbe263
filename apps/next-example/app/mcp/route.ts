import type { McpRouteHandler, McpRouteHandlers } from '@mcp-kit/next';
import { routes, servedBy } from '../../mcp';

function route(method: keyof McpRouteHandlers): McpRouteHandler {
  return async function mcpRoute(request) {
    const { handlers, instanceName } = await routes();
    return servedBy(await handlers[method](request), instanceName);
  };
}

export const GET = route('GET');
export const POST = route('POST');
export const DELETE = route('DELETE');
export const PUT = route('PUT');
export const PATCH = route('PATCH');

// Sessions and SSE streams live in the Node.js server process; the edge runtime has neither.
export const runtime = 'nodejs';
// An MCP endpoint answers per request: never prerender or cache it.
export const dynamic = 'force-dynamic';
