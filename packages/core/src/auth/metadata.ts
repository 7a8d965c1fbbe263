import type { Rejection } from '../http/errors.js';
import type { HeaderMap, OutHeaders } from '../ports/http.js';
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

/**
 * A request for the metadata, as an adapter hands it over: what it asked for, its headers (`Host`
 * only picks among configured resources), and where it arrived, from the listening socket.
 */
export interface MetadataRequest {
  method: string;
  /** The request-target's path and query, as sent: `/.well-known/oauth-protected-resource/mcp`. */
  path: string;
  headers: HeaderMap;
  /** The listener's address and port, which the loopback default (no `auth.resource`) needs. */
  localAddress?: string | undefined;
  localPort?: number | undefined;
  /** The connection itself is TLS. */
  tls?: boolean | undefined;
}

/** The metadata's HTTP answer, for an adapter to write as is. */
export interface MetadataResponse {
  status: number;
  headers: OutHeaders;
  body: string | undefined;
}

/** RFC 9728 §3.1: the metadata URL of a resource, the well-known path inserted before the resource's path. */
export function metadataUrlOf(resource: string): string {
  const url = new URL(resource);
  const path = url.pathname === '/' ? '' : url.pathname.replace(/\/$/, '');
  return `${url.origin}${METADATA_PATH}${path}${url.search}`;
}

/** The metadata document (RFC 9728 §2) of `resource`, a resource this server accepts tokens for. */
export function metadataDocument(auth: ResolvedAuth, resource: string): ProtectedResourceMetadata {
  return {
    resource,
    authorization_servers: auth.authorizationServers,
    ...(auth.scopesSupported ? { scopes_supported: auth.scopesSupported } : {}),
    // RFC 6750 §2.1 only: the query (§2.3) is refused, and a POST's body is JSON-RPC, not a form (§2.2).
    bearer_methods_supported: ['header'],
    ...(auth.resourceName === undefined ? {} : { resource_name: auth.resourceName }),
  };
}

const CORS = {
  // Browser-based clients fetch the metadata from another origin (RFC 9728 §3 allows anyone to).
  'access-control-allow-origin': '*',
};

const ALLOW = 'GET, HEAD, OPTIONS';

/**
 * The metadata's answer to `method`: the CORS preflight, `405` for a method it has no answer to,
 * the document of `resource`, or, when the request has no resource here, its refusal.
 */
export function metadataAnswer(auth: ResolvedAuth, method: string, resource: string | Rejection): MetadataResponse {
  const verb = method.toUpperCase();
  if (verb === 'OPTIONS') {
    return {
      status: 204,
      headers: {
        ...CORS,
        'access-control-allow-methods': ALLOW,
        // A browser-based client sends both to every URL of the server it talks to (MCP
        // `basic/authorization`, `basic/transports`), the metadata's included.
        'access-control-allow-headers': 'Authorization, MCP-Protocol-Version',
        'access-control-max-age': '86400',
        allow: ALLOW,
      },
      body: undefined,
    };
  }
  if (verb !== 'GET' && verb !== 'HEAD') return jsonError(405, -32000, `Method not allowed: ${verb}. Use GET.`, { allow: ALLOW });
  if (typeof resource !== 'string') return jsonError(resource.status, resource.code, resource.message, resource.headers);
  const body = JSON.stringify(metadataDocument(auth, resource));
  return {
    status: 200,
    headers: { ...CORS, 'content-type': 'application/json', 'cache-control': 'max-age=300' },
    body: verb === 'HEAD' ? undefined : body,
  };
}

function jsonError(status: number, code: number, message: string, headers: Record<string, string> = {}): MetadataResponse {
  const body = JSON.stringify({ jsonrpc: '2.0', error: { code, message } });
  return { status, headers: { 'content-type': 'application/json', ...headers }, body };
}
