import { OK, type Rejection, type Verdict } from '../http/errors.js';
import { header, hostName } from '../http/rules.js';
import type { CoreRequest } from '../ports/http.js';
import type { AuthInfo } from '../ports/mcp.js';
import { asError } from '../util/errors.js';
import { bearerToken, insufficientScope, invalidToken, misdirected, verifierUnavailable } from './challenge.js';
import {
  metadataDocument,
  metadataResponse,
  metadataUrlOf,
  resourceOf,
  type MetadataResponse,
  type ProtectedResourceMetadata,
} from './metadata.js';
import type { ResolvedAuth } from './options.js';

/** The resource identifier of a request and where its metadata is, as a refusal names them. */
interface Resource {
  resource: string;
  metadataUrl: string;
}

/** Request URLs seen lately (their Host header is the client's: bounded). */
const MAX_REMEMBERED_URLS = 64;

/**
 * The OAuth 2.1 resource server of an endpoint (MCP `basic/authorization`): checks each request's
 * bearer token before anything else sees the request, then the scopes of its tool calls once the
 * body is read. Refusals are {@link Rejection}s with their `WWW-Authenticate` challenge.
 */
export class ResourceServer {
  private readonly resources = new Map<string, Resource>();
  private readonly fixed: Resource | undefined;
  /** Hosts already reported as refused (see `resourceOf`): one report each, not one per request. */
  private readonly reported = new Set<string>();

  constructor(
    readonly auth: ResolvedAuth,
    private readonly onError: (error: Error) => void,
    /** Without `auth.resource`, the only hosts a resource is made of (the handler's `allowedHosts`). */
    private readonly allowedHosts: readonly string[],
  ) {
    if (auth.resource !== undefined) this.fixed = { resource: auth.resource, metadataUrl: metadataUrlOf(auth.resource) };
  }

  /**
   * Verifies the request's bearer token and requires the endpoint's scopes. On success the verified
   * identity replaces whatever an adapter's `getAuthInfo` gave: it is what tools see as
   * `extra.authInfo` / `ctx.http.authInfo` and what sessions and tasks are bound to.
   */
  async authenticate(req: CoreRequest): Promise<Verdict> {
    const where = this.resourceOf(req);
    if (!where) return misdirected(this.hostOf(req));
    const scopes = this.auth.scopes;
    const bearer = bearerToken(req.headers, req.url, where.metadataUrl, scopes);
    if (!bearer.ok) return bearer.rejection;
    let info: AuthInfo;
    try {
      info = await this.auth.verifier(bearer.token, { resource: where.resource });
    } catch (error) {
      return this.refusalOf(error, where);
    }
    if (!isAuthInfo(info)) {
      this.onError(new TypeError('auth.verifier resolved to something that is not an AuthInfo ({ token, clientId, scopes })'));
      return verifierUnavailable();
    }
    // The SDK's requireBearerAuth checks this too: a verifier may not look at `exp`.
    if (info.expiresAt !== undefined && info.expiresAt * 1000 <= Date.now()) {
      return invalidToken('the access token expired', where.metadataUrl, scopes);
    }
    if (scopes.length > 0 && !scopes.every((s) => info.scopes.includes(s))) return insufficientScope(scopes, where.metadataUrl);
    if (info.resource === undefined) info = { ...info, resource: new URL(where.resource) };
    req.authInfo = info;
    return OK;
  }

  /**
   * A `tools/call` (alone or in a 2025 batch) of a tool with `toolScopes` needs them on top of the
   * endpoint's: `403 insufficient_scope` naming all it needs, before any session or server sees it.
   */
  checkToolScopes(req: CoreRequest, body: unknown): Verdict {
    const { toolScopes } = this.auth;
    if (toolScopes.size === 0) return OK;
    const granted = req.authInfo?.scopes ?? [];
    const needed = new Set<string>();
    for (const message of Array.isArray(body) ? body : [body]) {
      const call = message as { method?: unknown; params?: { name?: unknown } } | null;
      if (typeof call !== 'object' || call === null || call.method !== 'tools/call') continue;
      const name = call.params?.name;
      const scopes = typeof name === 'string' ? toolScopes.get(name) : undefined;
      if (scopes && !scopes.every((s) => granted.includes(s))) for (const s of scopes) needed.add(s);
    }
    if (needed.size === 0) return OK;
    const where = this.resourceOf(req);
    if (!where) return misdirected(this.hostOf(req));
    return insufficientScope([...new Set([...this.auth.scopes, ...needed])], where.metadataUrl);
  }

  /**
   * A `tasks/*` request for a task of `tool` (its own principal's: checked before) needs what a
   * call of that tool needs: the token that polls a task may be another than the one that made it.
   */
  checkTaskScopes(req: CoreRequest, tool: string | undefined): Verdict {
    const scopes = tool === undefined ? undefined : this.auth.toolScopes.get(tool);
    if (!scopes) return OK;
    const granted = req.authInfo?.scopes ?? [];
    if (scopes.every((s) => granted.includes(s))) return OK;
    const where = this.resourceOf(req);
    if (!where) return misdirected(this.hostOf(req));
    return insufficientScope([...new Set([...this.auth.scopes, ...scopes])], where.metadataUrl);
  }

  /** The metadata document for a request to `requestUrl` (see `McpHandler.protectedResourceMetadata`). */
  metadataDocument(requestUrl: URL, mcpPath?: string): ProtectedResourceMetadata {
    return metadataDocument(this.auth, requestUrl, mcpPath);
  }

  /** The metadata's answer for a request to `requestUrl`, or `undefined` when that is no metadata URL of this endpoint. */
  metadataResponse(method: string, requestUrl: URL, mcpPath?: string): MetadataResponse | undefined {
    const answer = metadataResponse(this.auth, method, requestUrl, mcpPath);
    if (answer && !this.fixed && !this.allowed(requestUrl)) {
      const refused = misdirected(requestUrl.host);
      const body = JSON.stringify({ jsonrpc: '2.0', error: { code: refused.code, message: refused.message } });
      return { status: refused.status, headers: { 'content-type': 'application/json' }, body };
    }
    return answer;
  }

  private refusalOf(error: unknown, where: Resource): Rejection {
    const name = (error as { name?: unknown } | null)?.name;
    const message = (error as { message?: unknown } | null)?.message;
    const description = typeof message === 'string' && message !== '' ? message : 'the access token is not valid';
    if (name === 'InvalidTokenError') return invalidToken(description, where.metadataUrl, this.auth.scopes);
    if (name === 'InsufficientScopeError') {
      const wanted = (error as { scopes?: unknown }).scopes;
      const scopes = Array.isArray(wanted) ? wanted.filter((s): s is string => typeof s === 'string') : [];
      return insufficientScope([...new Set([...this.auth.scopes, ...scopes])], where.metadataUrl);
    }
    this.onError(asError(error, 'auth.verifier failed'));
    return verifierUnavailable();
  }

  /**
   * This request's resource: the configured one, or its origin and path, but only on a host of
   * `allowedHosts`. A resource made of any Host header would undo the audience check (RFC 8707):
   * a server that a victim gave a token to could replay it here with its own name in `Host`, and
   * the token's audience would match. `undefined` (refused, and reported once per host) otherwise.
   */
  private resourceOf(req: CoreRequest): Resource | undefined {
    if (this.fixed) return this.fixed;
    const url = req.url ?? new URL(`http://${header(req.headers, 'host') ?? 'localhost'}/`);
    const key = `${url.origin}${url.pathname}`;
    let found = this.resources.get(key);
    if (!found) {
      if (!this.allowed(url)) return undefined;
      const resource = resourceOf(url);
      found = { resource, metadataUrl: metadataUrlOf(resource) };
      if (this.resources.size >= MAX_REMEMBERED_URLS) this.resources.delete(this.resources.keys().next().value!);
      this.resources.set(key, found);
    }
    return found;
  }

  private allowed(url: URL): boolean {
    if (this.allowedHosts.includes(hostName(url.host))) return true;
    if (!this.reported.has(url.host) && this.reported.size < MAX_REMEMBERED_URLS) {
      this.reported.add(url.host);
      this.onError(
        new Error(
          `auth: a request for host ${JSON.stringify(url.host)} was refused: without auth.resource the resource is made of the request's host, which must then be one of allowedHosts; set auth.resource to the URL clients use (or add the host to allowedHosts)`,
        ),
      );
    }
    return false;
  }

  private hostOf(req: CoreRequest): string {
    return req.url?.host ?? header(req.headers, 'host') ?? '';
  }
}

function isAuthInfo(value: unknown): value is AuthInfo {
  const info = value as AuthInfo | null | undefined;
  return (
    typeof info === 'object' &&
    info !== null &&
    typeof info.token === 'string' &&
    typeof info.clientId === 'string' &&
    Array.isArray(info.scopes) &&
    (info.expiresAt === undefined || typeof info.expiresAt === 'number')
  );
}
