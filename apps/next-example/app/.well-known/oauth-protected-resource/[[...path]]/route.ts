import type { McpAuthMetadataRoutes, McpRouteHandler } from '@mcp-kit/next';
import { routes, servedBy } from '../../../../mcp';

// RFC 9728 Protected Resource Metadata, at /.well-known/oauth-protected-resource and at its
// path-suffixed form for the endpoint (/.well-known/oauth-protected-resource/mcp), which MCP
// clients fetch from the 401's resource_metadata. OPTIONS: CORS for browser clients.
function route(method: keyof McpAuthMetadataRoutes): McpRouteHandler {
  return async function metadataRoute(request) {
    const { metadata, instanceName } = await routes();
    // Without AUTH_ISSUER the app is open: there is no authorization server to point to.
    if (!metadata)
      return Response.json({ jsonrpc: '2.0', error: { code: -32000, message: 'Not Found: this server takes no tokens' } }, { status: 404 });
    return servedBy(await metadata[method](request), instanceName);
  };
}

export const GET = route('GET');
export const HEAD = route('HEAD');
export const OPTIONS = route('OPTIONS');

export const runtime = 'nodejs';
export const dynamic = 'force-dynamic';
