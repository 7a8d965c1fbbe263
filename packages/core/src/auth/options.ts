import type { AuthInfo } from '../ports/mcp.js';

/** What a {@link TokenVerifier} is told about the request. */
export interface VerifyContext {
  /**
   * This endpoint's resource identifier (RFC 8707, RFC 9728): the `auth.resource` option, or the
   * request's origin and MCP path. A token must have been issued for it (its audience).
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
   * This endpoint's resource identifier, e.g. `'https://api.example.com/mcp'`: what clients ask
   * tokens for and what a token's audience must be. Default: the request's origin and path (no
   * query, no trailing `/`), as the adapter sees them; set it behind a proxy or a load balancer,
   * where the instance's own URL is not the one clients use.
   */
  resource?: string;
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
  resource: string | undefined;
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
  if (auth.resource !== undefined && !isResource(auth.resource)) {
    throw new TypeError(`${OWNER}.resource must be an absolute http(s) URL without a fragment, got ${JSON.stringify(auth.resource)}`);
  }
  const scopes = scopeList(auth.scopes, 'scopes');
  const toolScopes = new Map<string, string[]>();
  for (const [tool, list] of Object.entries(auth.toolScopes ?? {})) toolScopes.set(tool, scopeList(list, `toolScopes.${tool}`));
  const named = [...new Set([...scopes, ...[...toolScopes.values()].flat()])];
  return {
    authorizationServers: [...servers],
    resource: auth.resource,
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

function isResource(value: unknown): boolean {
  if (typeof value !== 'string' || !URL.canParse(value)) return false;
  const url = new URL(value);
  return (url.protocol === 'https:' || url.protocol === 'http:') && url.hash === '' && !value.includes('#');
}
