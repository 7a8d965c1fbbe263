import type { OutHeaders } from '../ports/http.js';
import type { ResolvedAuth } from './options.js';

/** RFC 9728 §3: where a resource's metadata is, before the resource's own path. */
export const METADATA_PATH = '/.well-known/oauth-protected-resource';

/** The Protected Resource Metadata document (RFC 9728 §2) the adapters serve. */
export interface ProtectedResourceMetadata {
  resource: string;
  authorization_servers: string[];
  scopes_supported?: string[];
  bearer_methods_supported: string[];
  resource_name?: string;
}

/** The metadata's HTTP answer, for an adapter to write as is. */
export interface MetadataResponse {
  status: number;
  headers: OutHeaders;
  body: string | undefined;
}

/**
 * A resource identifier from a request URL: its origin and path, without query or fragment, and
 * without a trailing `/` (the SDK client requires the resource to be a prefix of the URL it calls:
 * `/mcp/` would not be one of `/mcp`).
 */
export function resourceOf(url: URL): string {
  const path = url.pathname.length > 1 && url.pathname.endsWith('/') ? url.pathname.slice(0, -1) : url.pathname;
  return path === '/' ? url.origin : `${url.origin}${path}`;
}

/** RFC 9728 §3.1: the metadata URL of a resource, the well-known path inserted before the resource's path. */
export function metadataUrlOf(resource: string): string {
  const url = new URL(resource);
  const path = url.pathname === '/' ? '' : url.pathname.replace(/\/$/, '');
  return `${url.origin}${METADATA_PATH}${path}${url.search}`;
}

/**
 * The metadata document for a request to `requestUrl`: a metadata URL (`/.well-known/
 * oauth-protected-resource/mcp` names the resource `/mcp`; the bare well-known path names
 * `mcpPath`), or the MCP endpoint's own URL. A configured `resource` wins over both.
 */
export function metadataDocument(auth: ResolvedAuth, requestUrl: URL, mcpPath = '/mcp'): ProtectedResourceMetadata {
  return {
    resource: auth.resource ?? resourceOf(mcpUrlOf(requestUrl, mcpPath)),
    authorization_servers: auth.authorizationServers,
    ...(auth.scopesSupported ? { scopes_supported: auth.scopesSupported } : {}),
    // RFC 6750 §2.1 only: the query (§2.3) is refused, and a POST's body is JSON-RPC, not a form (§2.2).
    bearer_methods_supported: ['header'],
    ...(auth.resourceName === undefined ? {} : { resource_name: auth.resourceName }),
  };
}

/** The MCP endpoint a metadata URL describes (or `requestUrl` itself when it is no metadata URL). */
function mcpUrlOf(requestUrl: URL, mcpPath: string): URL {
  const path = requestUrl.pathname;
  if (path !== METADATA_PATH && !path.startsWith(`${METADATA_PATH}/`)) return requestUrl;
  const suffix = path.slice(METADATA_PATH.length);
  return new URL(suffix === '' || suffix === '/' ? mcpPath : suffix, requestUrl.origin);
}

const CORS = {
  // Browser-based clients fetch the metadata from another origin (RFC 9728 §3 allows anyone to).
  'access-control-allow-origin': '*',
};

/**
 * Answers a request for the metadata, or `undefined` when `requestUrl` is not a metadata URL of this
 * endpoint: the bare well-known path and the one suffixed with the MCP path (`mcpPath` when the
 * adapter knows it, the configured resource's path, or any path when neither is known).
 */
export function metadataResponse(auth: ResolvedAuth, method: string, requestUrl: URL, mcpPath?: string): MetadataResponse | undefined {
  const path = requestUrl.pathname.length > 1 ? requestUrl.pathname.replace(/\/$/, '') : requestUrl.pathname;
  if (path !== METADATA_PATH && !path.startsWith(`${METADATA_PATH}/`)) return undefined;
  // The configured resource is what clients were told, so its path is the one they ask for.
  const known = auth.resource === undefined ? mcpPath : new URL(auth.resource).pathname;
  const suffix = path.slice(METADATA_PATH.length);
  if (suffix !== '' && known !== undefined && suffix !== trimSlash(known)) return undefined;
  const verb = method.toUpperCase();
  if (verb === 'OPTIONS') {
    return {
      status: 204,
      headers: { ...CORS, 'access-control-allow-methods': 'GET, HEAD, OPTIONS', allow: 'GET, HEAD, OPTIONS' },
      body: undefined,
    };
  }
  if (verb !== 'GET' && verb !== 'HEAD') {
    const error = { jsonrpc: '2.0', error: { code: -32000, message: `Method not allowed: ${verb}. Use GET.` } };
    return { status: 405, headers: { 'content-type': 'application/json', allow: 'GET, HEAD, OPTIONS' }, body: JSON.stringify(error) };
  }
  const body = JSON.stringify(metadataDocument(auth, new URL(path, requestUrl.origin), known ?? '/mcp'));
  return {
    status: 200,
    headers: { ...CORS, 'content-type': 'application/json', 'cache-control': 'max-age=300' },
    body: verb === 'HEAD' ? undefined : body,
  };
}

function trimSlash(path: string): string {
  return path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
}
