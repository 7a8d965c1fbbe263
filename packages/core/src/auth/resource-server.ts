import { OK, type Rejection, type Verdict } from '../http/errors.js';
import { checkHostSyntax, header, LOCAL_HOSTS } from '../http/rules.js';
import type { CoreRequest } from '../ports/http.js';
import type { AuthInfo } from '../ports/mcp.js';
import { asError } from '../util/errors.js';
import { bearerToken, insufficientScope, invalidToken, verifierUnavailable } from './challenge.js';
import { METADATA_PATH, metadataAnswer, metadataDocument, type MetadataRequest, type MetadataResponse } from './metadata.js';
import { resolveAuth, type AuthOptions, type ResolvedAuth } from './options.js';
import { Resources, trimPath, type Arrival, type Resource } from './resource.js';

/**
 * The OAuth 2.1 resource server of an endpoint (MCP `basic/authorization`): checks each request's
 * bearer token before anything else sees the request, and the scopes of every request that
 * takes a tool's result away. Refusals are {@link Rejection}s with their `WWW-Authenticate`
 * challenge.
 */
export class ResourceServer {
  private readonly resources: Resources;
  /** The tools whose scopes a resume of a 2025 stream needs, by session and stream (see `streamOpened`). */
  private readonly scopedStreams = new Map<string, string[]>();

  constructor(
    readonly auth: ResolvedAuth,
    private readonly onError: (error: Error) => void,
    /** The loopback default's host names (the handler's `allowedHosts`). */
    allowedHosts: readonly string[],
  ) {
    this.resources = new Resources(auth.resources, allowedHosts, onError);
  }

  /**
   * Verifies the request's bearer token and requires the endpoint's scopes. On success the verified
   * identity replaces whatever an adapter's `getAuthInfo` gave: it is what tools see as
   * `extra.authInfo` / `ctx.http.authInfo` and what sessions and tasks are bound to.
   */
  async authenticate(req: CoreRequest): Promise<Verdict> {
    const where = this.resourceOf(req);
    if (!isResource(where)) return where;
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
    // Sessions and tasks are bound to the principal a token names: tokens that name nobody would
    // all be one principal, and each could take over what another one started.
    if (info.clientId === '' && !hasSubject(info)) {
      return invalidToken('the access token names no subject (sub) and no client (client_id)', where.metadataUrl, scopes);
    }
    if (scopes.length > 0 && !scopes.every((s) => info.scopes.includes(s))) return insufficientScope(scopes, where.metadataUrl);
    if (info.resource === undefined) info = { ...info, resource: new URL(where.resource) };
    req.authInfo = info;
    return OK;
  }

  /**
   * The one rule for every request that starts a tool or takes a tool's result away: its token
   * must carry the scopes of each of `tools` (`toolScopes`) on top of the endpoint's, or it is
   * refused `403 insufficient_scope` naming all it needs, before anything is run or read. A
   * `tools/call` (alone or in a 2025 batch), `tasks/*` for a tool's task, `subscriptions/listen`
   * to tool tasks, a resumed 2025 stream of a tool call: each names its tools and asks here. The
   * token that reads a result may be another than the one that started the call (a narrower one
   * of the same principal), so the principal check alone does not cover it.
   */
  checkRead(req: CoreRequest, tools: Iterable<string | undefined>): Verdict {
    const { toolScopes } = this.auth;
    if (toolScopes.size === 0) return OK;
    const needed = new Set<string>();
    for (const tool of tools) for (const scope of this.missing(req.authInfo, tool)) needed.add(scope);
    if (needed.size === 0) return OK;
    const where = this.resourceOf(req);
    if (!isResource(where)) return where;
    return insufficientScope([...new Set([...this.auth.scopes, ...needed])], where.metadataUrl);
  }

  /** Whether `authInfo`'s token may read what a call of `tool` returns (see {@link checkRead}): for a stream that outlives its request. */
  mayRead(authInfo: AuthInfo | undefined, tool: string | undefined): boolean {
    return this.auth.toolScopes.size === 0 || this.missing(authInfo, tool).length === 0;
  }

  /**
   * A 2025 session's POST opened `streamId` for `messages`: a client that resumes it later (`GET`
   * + `Last-Event-ID`) reads their results, so {@link checkResume} asks it for their tools' scopes.
   * Kept here, on the instance that runs the calls (bounded: the oldest go first).
   */
  streamOpened(sessionId: string, streamId: string, messages: unknown): void {
    const { toolScopes } = this.auth;
    if (toolScopes.size === 0) return;
    const tools = toolsCalled(messages).filter((tool) => toolScopes.has(tool));
    if (tools.length === 0) return;
    if (this.scopedStreams.size >= MAX_SCOPED_STREAMS) this.scopedStreams.delete(this.scopedStreams.keys().next().value!);
    this.scopedStreams.set(`${sessionId} ${streamId}`, tools);
  }

  /** A resume of a 2025 stream: the scopes of the tools its POST called (see {@link streamOpened}), by {@link checkRead}. */
  checkResume(req: CoreRequest, sessionId: string, streamId: string): Verdict {
    const tools = this.scopedStreams.get(`${sessionId} ${streamId}`);
    return tools ? this.checkRead(req, tools) : OK;
  }

  /**
   * The metadata's HTTP answer for a request, or `undefined` when the request is for no metadata
   * URL of this endpoint (`mcpPath`: the MCP endpoint's path when the adapter knows it). Its
   * `resource` is the request's resource as {@link authenticate} would check it: configuration's,
   * never the request's headers'.
   */
  metadataResponse(request: MetadataRequest, mcpPath?: string): MetadataResponse | undefined {
    const query = request.path.indexOf('?');
    const path = trimPath(query === -1 ? request.path : request.path.slice(0, query));
    if (path !== METADATA_PATH && !path.startsWith(`${METADATA_PATH}/`)) return undefined;
    const host = checkHostSyntax(header(request.headers, 'host'));
    if (!host.ok) return metadataAnswer(this.auth, 'GET', host);
    const suffix = path.slice(METADATA_PATH.length);
    // The configured resource is what clients were told, so its path is the one they ask for.
    const known = this.resources.fixedPath ?? (mcpPath === undefined ? undefined : trimPath(mcpPath));
    if (suffix !== '' && known !== undefined && suffix !== known) return undefined;
    const where = this.resources.of(arrivalOf(request), suffix === '' ? (known ?? '/mcp') : suffix);
    // One of several configured names: its own path must be the suffix too.
    if (isResource(where) && suffix !== '' && suffix !== where.path) return undefined;
    return metadataAnswer(this.auth, request.method, isResource(where) ? where.resource : where);
  }

  /** The metadata document for a request (see `McpHandler.protectedResourceMetadata`); `undefined` when the request has no resource here. */
  metadataDocument(request: MetadataRequest, mcpPath = '/mcp') {
    const where = this.resources.of(arrivalOf(request), trimPath(mcpPath));
    return isResource(where) ? metadataDocument(this.auth, where.resource) : undefined;
  }

  private missing(authInfo: AuthInfo | undefined, tool: string | undefined): string[] {
    const scopes = tool === undefined ? undefined : this.auth.toolScopes.get(tool);
    if (!scopes) return [];
    const granted = authInfo?.scopes ?? [];
    return scopes.filter((s) => !granted.includes(s));
  }

  private resourceOf(req: CoreRequest): Resource | Rejection {
    return this.resources.of(arrivalOf(req), req.url?.pathname ?? '/');
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
    // An authorization server backing off was reported when it failed: not again for each request.
    if (name === 'AuthorizationServerUnavailable') return verifierUnavailable((error as { retryAfterSec?: number }).retryAfterSec);
    this.onError(asError(error, 'auth.verifier failed'));
    return verifierUnavailable();
  }
}

/**
 * The `auth` option's resource server, checked when the handler is created. Without
 * `auth.resource` only a loopback listener has a resource (see `AuthOptions.resource`): a handler
 * meant for other names, or for several instances behind a load balancer, would refuse every
 * request, so it is refused here instead, saying what to set.
 */
export function createResourceServer(
  options: AuthOptions,
  handler: { allowedHosts: string[]; clustered: boolean },
  onError: (error: Error) => void,
): ResourceServer {
  const auth = resolveAuth(options);
  if (auth.resources.length === 0) {
    const named = handler.allowedHosts.filter((h) => !LOCAL_HOSTS.includes(h) && !/^127(\.[0-9]{1,3}){3}$/.test(h));
    const why =
      named.length > 0
        ? `allowedHosts names ${named.join(', ')}`
        : handler.clustered
          ? 'a cluster serves its clients through a load balancer'
          : undefined;
    if (why) {
      throw new TypeError(
        `createMcpHandler: auth.resource must be set (${why}): without it only requests to a loopback listener have a resource to check tokens for; set it to the URL clients use, e.g. 'https://mcp.example.com/mcp'`,
      );
    }
  }
  return new ResourceServer(auth, onError, handler.allowedHosts);
}

/** Streams of tools with `toolScopes` remembered for their resumes (a few dozen bytes each). */
const MAX_SCOPED_STREAMS = 10_000;

/** The tools a POST body calls (one message or a 2025 batch), for {@link ResourceServer.checkRead}. */
export function toolsCalled(body: unknown): string[] {
  const tools: string[] = [];
  for (const message of Array.isArray(body) ? body : [body]) {
    const call = message as { method?: unknown; params?: { name?: unknown } } | null;
    if (typeof call === 'object' && call !== null && call.method === 'tools/call' && typeof call.params?.name === 'string') {
      tools.push(call.params.name);
    }
  }
  return tools;
}

function arrivalOf(req: {
  headers: CoreRequest['headers'];
  localAddress?: string | undefined;
  localPort?: number | undefined;
  tls?: boolean | undefined;
}): Arrival {
  return { host: header(req.headers, 'host'), localAddress: req.localAddress, localPort: req.localPort, tls: req.tls };
}

function isResource(value: Resource | Rejection): value is Resource {
  return (value as Rejection).ok !== false;
}

function hasSubject(info: AuthInfo): boolean {
  const sub = (info.extra as { sub?: unknown } | undefined)?.sub;
  return typeof sub === 'string' && sub !== '';
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
