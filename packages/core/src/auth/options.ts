import type { AuthInfo } from '../ports/mcp.js';

/** What a {@link TokenVerifier} is told about the request. */
export interface VerifyContext {
  /**
   * This endpoint's resource identifier (RFC 8707, RFC 9728) for the request: `auth.resource`
   * (the one of them the request's `Host` names, when it lists several), or on a loopback listener
   * without it, the listening address and MCP path. Never made of a request header. A token must
   * have been issued for it (its audience).
   */
  resource: string;
}

/**
 * Checks a bearer token and says who it stands for, in the SDK's `AuthInfo` shape (both majors'):
 * `clientId`, `scopes`, `expiresAt` (seconds since the epoch), and `extra.sub` for the user, which
 * with `clientId` is the principal sessions and tasks are bound to. Throw {@link InvalidTokenError}
 * for a token you refuse; anything else thrown answers `503`. {@link jwtVerifier} and
 * {@link introspectionVerifier} are two; write your own for anything else.
 */
export type TokenVerifier = (token: string, ctx: VerifyContext) => Promise<AuthInfo>;

/**
 * The OAuth 2.1 resource server (MCP `basic/authorization`, 2025-11-25 and 2026-07-28): every MCP
 * request needs `Authorization: Bearer <token>`, checked by `verifier`; clients find where to get
 * one from the Protected Resource Metadata (RFC 9728) the adapters serve at
 * `/.well-known/oauth-protected-resource/<mcp path>`.
 *
 * @example
 * ```ts source="../../examples/core.examples.ts#auth"
 * const mcp = createMcpHandler({
 *   server: () => buildServer(),
 *   auth: {
 *     authorizationServers: ['https://as.example.com'],
 *     verifier: jwtVerifier({ issuer: 'https://as.example.com' }),
 *     scopes: ['mcp'], // every request
 *     toolScopes: { long_task: ['mcp:long'] }, // tools/call of long_task, both eras
 *   },
 * });
 * app.use(mcpAuthMetadata(mcp)); // /.well-known/oauth-protected-resource/mcp
 * app.use('/mcp', mcpExpress(mcp));
 * ```
 */
export interface AuthOptions {
  /** The issuers of the authorization servers whose tokens are accepted, as their metadata names them (listed in the metadata). */
  authorizationServers: string[];
  /**
   * This endpoint's resource identifier, the public URL clients use, e.g.
   * `'https://api.example.com/mcp'`: what clients ask tokens for, what a token's audience must be
   * (character for character), and what the metadata names whatever the request says. Behind a
   * TLS-terminating proxy or a load balancer, the URL clients see, not the instance's own. A
   * deployment reached under several names lists them: a request's `Host` then picks the one
   * whose host and port it names (others are refused `403`), and a token must be for that one.
   *
   * Default: none, which serves requests that reach a loopback listener only (local development,
   * a desktop app): their resource is `http://<Host name>:<listening port><MCP path>`, the Host
   * being a name of `allowedHosts` and its port the listening one; any other request is refused
   * `403` (and reported once). The node adapters read the listener from the socket; a fetch
   * handler must be told it (`localAddress`, `localPort`). `Host`, `X-Forwarded-*` and
   * `Forwarded` never make a resource.
   */
  resource?: string | string[];
  /** Checks each request's bearer token: {@link jwtVerifier}, {@link introspectionVerifier}, or your own. */
  verifier: TokenVerifier;
  /** Scopes every request needs (`403 insufficient_scope` without them). Default: none. */
  scopes?: string[];
  /**
   * Scopes a `tools/call` of a tool needs on top of `scopes`, by tool name, in both eras (a
   * 2025 session's call and a 2026-07-28 request alike): without them `403 insufficient_scope`
   * naming every scope the call needs, and the tool does not run. Default: none.
   */
  toolScopes?: Record<string, string[]>;
  /** `scopes_supported` in the metadata. Default: `scopes` and every `toolScopes` scope, if any. */
  scopesSupported?: string[];
  /** `resource_name` in the metadata: a name for people. Default: none. */
  resourceName?: string;
}

/** {@link AuthOptions}, checked, with the defaults filled in. */
export interface ResolvedAuth {
  authorizationServers: string[];
  /** `resource` as a list: empty for the loopback default. */
  resources: string[];
  verifier: TokenVerifier;
  scopes: string[];
  toolScopes: ReadonlyMap<string, string[]>;
  scopesSupported: string[] | undefined;
  resourceName: string | undefined;
}

const OWNER = 'createMcpHandler: auth';

/** Checks the `auth` option when the handler is created (a `TypeError` naming what is wrong) and fills in the defaults. */
export function resolveAuth(auth: AuthOptions): ResolvedAuth {
  if (typeof auth !== 'object' || auth === null) throw new TypeError(`${OWNER} must be an object ({ authorizationServers, verifier })`);
  const servers = auth.authorizationServers;
  if (!Array.isArray(servers) || servers.length === 0 || !servers.every(isAbsoluteUrl)) {
    throw new TypeError(
      `${OWNER}.authorizationServers must list the issuer URLs of your authorization servers, got ${JSON.stringify(servers)}`,
    );
  }
  if (typeof auth.verifier !== 'function') {
    throw new TypeError(`${OWNER}.verifier must be a function (token, { resource }) => Promise<AuthInfo>, e.g. jwtVerifier({ issuer })`);
  }
  const resources = checkResources(auth.resource, OWNER);
  const scopes = scopeList(auth.scopes, 'scopes');
  const toolScopes = new Map<string, string[]>();
  for (const [tool, list] of Object.entries(auth.toolScopes ?? {})) toolScopes.set(tool, scopeList(list, `toolScopes.${tool}`));
  const named = [...new Set([...scopes, ...[...toolScopes.values()].flat()])];
  return {
    authorizationServers: [...servers],
    resources,
    verifier: auth.verifier,
    scopes,
    toolScopes,
    scopesSupported: auth.scopesSupported ? scopeList(auth.scopesSupported, 'scopesSupported') : named.length > 0 ? named : undefined,
    resourceName: auth.resourceName,
  };
}

/** A scope is a non-empty run of printable ASCII without spaces, quotes or backslashes (RFC 6749 §3.3). */
const SCOPE = /^[\x21\x23-\x5b\x5d-\x7e]+$/;

function scopeList(value: unknown, name: string): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || !value.every((s) => typeof s === 'string' && SCOPE.test(s))) {
    throw new TypeError(`${OWNER}.${name} must be an array of scope names (no spaces or quotes), got ${JSON.stringify(value)}`);
  }
  return [...value];
}

function isAbsoluteUrl(value: unknown): boolean {
  return typeof value === 'string' && URL.canParse(value);
}

/**
 * Checks `auth.resource` when the handler is created: one or more absolute http(s) URLs without a
 * fragment, each telling itself apart from the others by host and port (a `Host` header carries no
 * scheme: `http://a` and `https://a` are one name to it). Returns the list.
 */
function checkResources(value: unknown, owner: string): string[] {
  const list = value === undefined ? [] : Array.isArray(value) ? value : [value];
  if (Array.isArray(value) && value.length === 0) throw new TypeError(`${owner}.resource must name at least one URL, got []`);
  for (const r of list) {
    if (!isResource(r)) {
      throw new TypeError(
        `${owner}.resource must be an absolute http(s) URL without a fragment (or a list of them), got ${JSON.stringify(r)}`,
      );
    }
  }
  const seen = new Map<string, string>();
  for (const r of list as string[]) {
    const url = new URL(r);
    const authority = `${url.hostname.toLowerCase()}:${url.port || 'default'}`;
    const other = seen.get(authority);
    if (other !== undefined) {
      throw new TypeError(
        `${owner}.resource lists ${JSON.stringify(other)} and ${JSON.stringify(r)}, which a Host header cannot tell apart (same host and port)`,
      );
    }
    seen.set(authority, r);
  }
  return [...(list as string[])];
}

function isResource(value: unknown): value is string {
  if (typeof value !== 'string' || !URL.canParse(value) || value.includes('#')) return false;
  const url = new URL(value);
  return url.protocol === 'https:' || url.protocol === 'http:';
}
