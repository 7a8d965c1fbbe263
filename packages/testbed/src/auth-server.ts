/**
 * A real OAuth 2.1 authorization server for the end-to-end tests: `oidc-provider` (a certified
 * OpenID Provider library) on 127.0.0.1 and a free port, with dynamic client registration (RFC
 * 7591), PKCE required for every client, the authorization code flow, and resource indicators (RFC
 * 8707) whose access tokens are JWTs (RFC 9068) with the resource as their audience. The login and
 * consent screens answer by themselves (a fixed account consents to what was asked), but only
 * through redirects: the test's {@link Browser} follows each one, cookies included, as a user agent
 * would. Started and stopped by the test.
 */
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ParameterizedContext } from 'koa';
import Provider, { errors, type Configuration } from 'oidc-provider';

/** The scopes an MCP resource of these tests may be granted: `mcp` for the endpoint, `mcp:long` for `long_task`. */
export const RESOURCE_SCOPES = ['mcp', 'mcp:long'] as const;

export interface AuthServerOptions {
  /** Lifetime of the access tokens issued, in seconds (the tests of expiry set a few). Default 300. */
  accessTokenTtlSeconds?: number;
  /** The account that logs in (the token's `sub`). Default `alice`. */
  accountId?: string;
  /**
   * Whether a client registered with a `scope` (RFC 7591) may later ask for only those scopes, as
   * oidc-provider (and Keycloak) enforce by default. The SDK clients register with the scope of
   * the 401 that sent them (SEP-835), so with this on, their step-up to a wider scope is refused
   * `invalid_scope`. Default `false`: a registration's `scope` is dropped, and any client may ask
   * for any scope of a resource it names.
   */
  registeredScopeIsCeiling?: boolean;
}

/** An authorization or token request as the authorization server received it. */
export interface AuthServerRequest {
  /** `authorization`, `token`, `registration`, `discovery`, `jwks`, `interaction` or `other`. */
  endpoint: string;
  method: string;
  path: string;
  status: number;
  /** The `resource` parameters (RFC 8707) the client sent, in order. */
  resource: string[];
  scope: string | undefined;
  grantType: string | undefined;
}

/** An access token the server issued, as it issued it (its claims, decoded without checking). */
export interface IssuedToken {
  aud: string | string[];
  scope: string;
  sub: string;
  clientId: string;
  /** Its lifetime in seconds. */
  ttlSeconds: number;
}

export interface AuthServer {
  /** The issuer identifier, exactly as its metadata says it: `http://127.0.0.1:<port>`, no trailing slash. */
  readonly issuer: string;
  /** Every request it answered, in order. */
  readonly requests: AuthServerRequest[];
  /** Every access token it issued, in order. */
  readonly tokens: IssuedToken[];
  /** How many clients registered themselves (RFC 7591). */
  readonly registrations: number;
  /**
   * Lets clients ask for tokens for `resource` (an MCP endpoint's URL, as its Protected Resource
   * Metadata says it); any other resource indicator is refused with `invalid_target`.
   */
  allowResource(resource: string): void;
  /**
   * An access token for `resource` from the token endpoint, as a service gets one (the client
   * credentials grant, RFC 6749 §4.4, with a resource indicator): issued and signed by the server
   * itself, shaped first as `shape` says (claims left out or added, header fields) — how the
   * tests get a real token that is wrong in one precise way. `resource` must be allowed.
   */
  issueToken(resource: string, scope: string, shape?: TokenShape): Promise<string>;
  /** Makes the server answer `status` at its JWKS endpoint (`200`: serve it again), as a failing authorization server does. */
  failJwks(status: number): void;
  close(): Promise<void>;
}

/** How {@link AuthServer.issueToken} changes a token before it is signed. */
export interface TokenShape {
  /** Claims over the issued ones; `undefined` leaves one out (`exp`, `sub`, `client_id`). */
  claims?: Record<string, unknown>;
  /** JWS header fields over the issued ones (`typ`); `undefined` leaves one out. */
  header?: Record<string, unknown>;
}

/** The service client {@link AuthServer.issueToken} authenticates as. */
const SERVICE_CLIENT = { client_id: 'mcp-test-service', client_secret: randomUUID() };

/**
 * Starts the authorization server. Its port is taken before the provider is made, so that the
 * issuer (which goes into every token and metadata document) names it.
 */
export async function startAuthServer(options: AuthServerOptions = {}): Promise<AuthServer> {
  const { accessTokenTtlSeconds = 300, accountId = 'alice', registeredScopeIsCeiling = false } = options;
  const requests: AuthServerRequest[] = [];
  const tokens: IssuedToken[] = [];
  const resources = new Set<string>();
  let registrations = 0;
  let nextShape: TokenShape | undefined;
  let jwksStatus = 200;

  // The provider is made once the port is known; until then (never, in practice) answer 503.
  let handle: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => res.writeHead(503).end();
  const server = createServer((req, res) => handle(req, res));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: randomUUID(), alg: 'RS256', use: 'sig' };

  const configuration: Configuration = {
    jwks: { keys: [signingKey] },
    // Cookie signing keys: per run, like the signing key.
    cookies: { keys: [randomUUID()] },
    scopes: ['openid', 'offline_access', ...RESOURCE_SCOPES],
    findAccount: (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
    // OAuth 2.1 and the MCP authorization spec: PKCE for every client, public or confidential.
    pkce: { required: () => true },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    // Every lifetime said, so the provider does not print a notice for each it had to default.
    ttl: {
      AccessToken: accessTokenTtlSeconds,
      AuthorizationCode: 60,
      Interaction: 600,
      Session: 3600,
      Grant: 3600,
      RefreshToken: 3600,
      IdToken: 3600,
    },
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        getResourceServerInfo: (_ctx, resourceIndicator) => {
          if (!resources.has(resourceIndicator)) throw new errors.InvalidTarget(`${resourceIndicator} is not a resource of this server`);
          return {
            scope: RESOURCE_SCOPES.join(' '),
            audience: resourceIndicator,
            accessTokenTTL: accessTokenTtlSeconds,
            accessTokenFormat: 'jwt',
            jwt: { sign: { alg: 'RS256' } },
          };
        },
        // A client that named one resource at the authorization endpoint gets a token for it at
        // the token endpoint even if it leaves `resource` out there (RFC 8707 allows either).
        useGrantedResource: () => true,
      },
    },
    // MCP clients are native or CLI apps redirecting to loopback; the default web-app rules refuse http: redirect URIs.
    clientDefaults: { application_type: 'native', grant_types: ['authorization_code'], response_types: ['code'] },
    clients: [{ ...SERVICE_CLIENT, grant_types: ['client_credentials'], redirect_uris: [], response_types: [] }],
    formats: {
      customizers: {
        // issueToken's shape, applied to the one token it asked for.
        jwt(_ctx, _token, jwt) {
          const shape = nextShape;
          nextShape = undefined;
          if (!shape) return;
          jwt.header = { ...jwt.header, ...shape.header };
          Object.assign(jwt.payload, shape.claims);
          for (const [name, value] of Object.entries(shape.claims ?? {})) if (value === undefined) delete jwt.payload[name];
        },
      },
    },
  };
  const provider = new Provider(issuer, configuration);

  provider.on('registration_create.success', () => registrations++);
  provider.on('access_token.issued', (token) => {
    tokens.push({
      aud: token.aud as string | string[],
      scope: String(token.scope ?? ''),
      sub: String(token.accountId ?? ''),
      clientId: String(token.clientId ?? ''),
      ttlSeconds: Number((token as { expiration?: number }).expiration),
    });
  });

  provider.use(async function recordRequest(ctx, next) {
    await next();
    const params = requestParams(ctx);
    requests.push({
      endpoint: endpointOf(ctx.path),
      method: ctx.method,
      path: ctx.path,
      status: ctx.status,
      resource: params.getAll('resource'),
      scope: params.get('scope') ?? undefined,
      grantType: params.get('grant_type') ?? undefined,
    });
  });
  if (!registeredScopeIsCeiling) {
    provider.use(async function registrationScopeIsNoCeiling(ctx, next) {
      if (ctx.method === 'POST' && ctx.path === '/reg' && ctx.is('application/json')) {
        const metadata = JSON.parse(await readText(ctx.req)) as Record<string, unknown>;
        delete metadata.scope;
        // The provider reads a body an upstream middleware parsed from request.body (it says so once, on stderr).
        (ctx.request as { body?: unknown }).body = metadata;
      }
      return next();
    });
  }
  provider.use(async function interactions(ctx, next) {
    if (ctx.method !== 'GET' || !/^\/interaction\/[^/]+$/.test(ctx.path)) return next();
    await finishInteraction(provider, ctx, accountId);
    // interactionFinished wrote the redirect on the Node response itself.
    ctx.respond = false;
  });

  provider.use(async function failingJwks(ctx, next) {
    if (jwksStatus === 200 || ctx.path !== '/jwks') return next();
    ctx.status = jwksStatus;
    ctx.body = { error: 'server_error' };
  });

  handle = provider.callback();
  return {
    issuer,
    requests,
    tokens,
    get registrations() {
      return registrations;
    },
    allowResource: (resource) => void resources.add(resource),
    async issueToken(resource, scope, shape) {
      nextShape = shape ?? {};
      const basic = Buffer.from(`${SERVICE_CLIENT.client_id}:${SERVICE_CLIENT.client_secret}`).toString('base64');
      const response = await fetch(`${issuer}/token`, {
        method: 'POST',
        headers: { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: 'client_credentials', resource, scope }).toString(),
      });
      const body = (await response.json()) as { access_token?: string; error?: string; error_description?: string };
      if (!body.access_token) throw new Error(`the token endpoint refused: ${body.error} ${body.error_description ?? ''}`);
      return body.access_token;
    },
    failJwks(status) {
      jwksStatus = status;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * The screens of a login and a consent, answered at once: `alice` logs in, then consents to the
 * scopes and resources the client asked for (what the provider lists as missing from the grant).
 */
async function finishInteraction(provider: Provider, ctx: ParameterizedContext, accountId: string): Promise<void> {
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  if (details.prompt.name === 'login') {
    await provider.interactionFinished(ctx.req, ctx.res, { login: { accountId } }, { mergeWithLastSubmission: false });
    return;
  }
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId: details.session!.accountId, clientId: String(details.params.client_id) });
  if (!grant) throw new Error(`grant ${details.grantId} of interaction ${details.uid} is gone`);
  const missing = details.prompt.details as { missingOIDCScope?: string[]; missingResourceScopes?: Record<string, string[]> };
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
  for (const [resource, scopes] of Object.entries(missing.missingResourceScopes ?? {})) grant.addResourceScope(resource, scopes.join(' '));
  const grantId = await grant.save();
  await provider.interactionFinished(ctx.req, ctx.res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}

function endpointOf(path: string): string {
  if (path === '/auth' || path.startsWith('/auth/')) return 'authorization';
  if (path === '/token') return 'token';
  if (path === '/reg' || path.startsWith('/reg/')) return 'registration';
  if (path.startsWith('/.well-known/')) return 'discovery';
  if (path === '/jwks') return 'jwks';
  if (path.startsWith('/interaction/')) return 'interaction';
  return 'other';
}

async function readText(stream: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** The query, or the form body the provider parsed (token and authorization POSTs). */
function requestParams(ctx: ParameterizedContext): URLSearchParams {
  const params = new URLSearchParams(ctx.querystring);
  const body = (ctx as unknown as { oidc?: { body?: Record<string, unknown> } }).oidc?.body;
  for (const [key, value] of Object.entries(body ?? {})) {
    for (const v of Array.isArray(value) ? value : [value]) if (typeof v === 'string') params.append(key, v);
  }
  return params;
}

/**
 * A user agent for the authorization endpoint: follows every redirect itself (never fetch's own
 * following), keeps the provider's cookies (login session, interaction) by name and path, and
 * stops at the client's redirect URI, whose URL it returns (`code`, `state`, `iss`). One Browser is
 * one person at one browser: a second authorization (a step-up) finds the login session.
 */
export class Browser {
  private readonly cookies = new Map<string, { value: string; path: string }>();
  /** Every URL it was sent to, in order. */
  readonly visited: string[] = [];

  /** `onHop`: told of each request and where it was redirected (the auth demo prints them). */
  constructor(private readonly onHop?: (url: URL, status: number, location: string | null) => void) {}

  async authorize(authorizationUrl: string | URL, redirectUri: string, maxRedirects = 10): Promise<URL> {
    let url = new URL(authorizationUrl);
    for (let hop = 0; hop <= maxRedirects; hop++) {
      if (url.href.startsWith(redirectUri)) return url;
      this.visited.push(url.href);
      const response = await fetch(url, { redirect: 'manual', headers: { cookie: this.cookieHeader(url) } });
      this.keepCookies(response);
      await response.body?.cancel();
      const location = response.headers.get('location');
      this.onHop?.(url, response.status, location);
      if (response.status < 300 || response.status >= 400 || !location) {
        throw new Error(`the authorization at ${url.href} ended with ${response.status}, not a redirect to ${redirectUri}`);
      }
      url = new URL(location, url);
    }
    throw new Error(`more than ${maxRedirects} redirects from ${String(authorizationUrl)}`);
  }

  private cookieHeader(url: URL): string {
    return [...this.cookies]
      .filter(([, c]) => url.pathname.startsWith(c.path))
      .map(([name, c]) => `${name}=${c.value}`)
      .join('; ');
  }

  private keepCookies(response: Response): void {
    for (const line of response.headers.getSetCookie()) {
      const [pair = '', ...attributes] = line.split(';').map((s) => s.trim());
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq);
      const value = pair.slice(eq + 1);
      const attribute = (key: string) => attributes.find((a) => a.toLowerCase().startsWith(`${key}=`))?.slice(key.length + 1);
      const expires = attribute('expires');
      const path = attribute('path') ?? '/';
      // The provider clears a cookie by sending it again already expired.
      if (value === '' || (expires && Date.parse(expires) <= Date.now()) || attribute('max-age') === '0') this.cookies.delete(name);
      else this.cookies.set(name, { value, path });
    }
  }
}
