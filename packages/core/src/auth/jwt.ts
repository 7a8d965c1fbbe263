import { errors, jwtVerify, type JWTPayload } from 'jose';
import type { AuthInfo } from '../ports/mcp.js';
import { Discovery } from './discovery.js';
import { InsufficientScopeError, InvalidTokenError } from './errors.js';
import { KeySet } from './jwks.js';
import type { TokenVerifier } from './options.js';

/** Options of {@link jwtVerifier}: whose tokens, for which audience, signed how. */
export interface JwtVerifierOptions {
  /** The authorization server's issuer identifier, exactly as its metadata and its tokens' `iss` say it. */
  issuer: string;
  /** The audience a token must name. Default: the endpoint's resource (RFC 8707), which is what MCP requires. */
  audience?: string | string[];
  /**
   * The signature algorithms accepted. Default: the asymmetric ones (`RS*`, `PS*`, `ES*`, `EdDSA`,
   * `Ed25519`); never `none`, and no `HS*` unless named here (a shared secret is no JWKS's business).
   */
  algorithms?: string[];
  /**
   * Where the issuer's keys are. Default: `jwks_uri` of the issuer's metadata (RFC 8414
   * `/.well-known/oauth-authorization-server`, then OpenID Connect's `openid-configuration`).
   */
  jwksUri?: string;
  /**
   * Leeway for `nbf` and `iat` (a token issued by a clock a little ahead), in seconds. Default `5`.
   * Not for `exp`: the resource server refuses a token from its `exp` on whatever the verifier
   * says, as the SDK's `requireBearerAuth` does; a client refreshes it then.
   */
  clockToleranceSec?: number;
  /**
   * A token naming a key the cached JWKS lacks makes the JWKS be fetched again, at most once per
   * this many ms (a flood of tokens with made-up key ids must not become a flood of requests to the
   * issuer). An issuer that rotates keys publishes the new one before signing with it. A failing
   * JWKS or metadata endpoint is asked again after 1 s, then twice as long after each failure (up
   * to a minute); meanwhile the keys it served last keep verifying tokens (up to an hour after
   * they were fetched), and a token they cannot verify gets `503`. Default `30_000`.
   */
  jwksCooldownMs?: number;
  /**
   * The JWS `typ` a token must have. Default: `at+jwt` (RFC 9068), `JWT`, or none, since most
   * providers' default access tokens are not typed `at+jwt` (Auth0's default profile, Entra ID
   * and Keycloak say `JWT`; Okta and Cognito say none); any other type (an ID token's
   * `id_token+jwt`, a logout token's) is refused. `'at+jwt'` accepts RFC 9068 access tokens only
   * (Auth0's "RFC 9068" profile, Keycloak with its `at+jwt` client setting, oidc-provider): an
   * ID token signed by the same issuer can then never pass, whatever its audience.
   */
  typ?: 'at+jwt';
  /**
   * How long a token's verification is reused, in ms (never past its `exp`): a client sends the
   * same token on every request, and checking an ES256 or RS256 signature costs more than the
   * rest of a tools/call. A key removed from the JWKS is trusted this much longer at most (the
   * JWKS itself is kept up to 10 minutes). `0` checks every request in full. Default `60_000`.
   */
  cacheMs?: number;
  /** Scopes every token must carry, checked here (`403 insufficient_scope` without them). Default: none. */
  requiredScopes?: string[];
}

const ASYMMETRIC = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];

/**
 * Verifies JWT access tokens (RFC 9068) with `jose` against the issuer's JWKS: fetched once (from
 * the issuer's metadata unless `jwksUri` is given), cached, and fetched again when a token names a
 * key it does not hold (at most every `jwksCooldownMs`; a failing issuer is asked with backoff).
 * Checks the token's one spelling (base64url without padding), the signature, the algorithm
 * (pinned), `typ`, `iss` (exactly), `aud` (the resource), `exp` (required), `nbf` and `iat`. The
 * identity: `clientId` from `client_id` (or `azp`, Okta's `cid`, Entra ID v1's `appid`), `scopes`
 * from `scope` (or `scp`, a string or an array), `expiresAt` from `exp`, and every claim in
 * `extra` (so `extra.sub` is the user). A token naming neither a subject nor a client is refused
 * by the resource server.
 *
 * @example
 * ```ts source="../../examples/core.examples.ts#jwtVerifier"
 * const verifier = jwtVerifier({ issuer: 'https://tenant.eu.auth0.com/', algorithms: ['RS256'] });
 * ```
 */
export function jwtVerifier(options: JwtVerifierOptions): TokenVerifier {
  const { issuer } = options;
  if (typeof issuer !== 'string' || !URL.canParse(issuer))
    throw new TypeError(`jwtVerifier: issuer must be a URL, got ${JSON.stringify(issuer)}`);
  const algorithms = options.algorithms ?? ASYMMETRIC;
  if (
    !Array.isArray(algorithms) ||
    algorithms.length === 0 ||
    algorithms.some((a) => typeof a !== 'string' || a.toLowerCase() === 'none')
  ) {
    throw new TypeError(`jwtVerifier: algorithms must list signature algorithms, never "none"; got ${JSON.stringify(options.algorithms)}`);
  }
  if (options.typ !== undefined && options.typ !== 'at+jwt') {
    throw new TypeError(`jwtVerifier: typ must be 'at+jwt' (or left out), got ${JSON.stringify(options.typ)}`);
  }
  const clockTolerance = options.clockToleranceSec ?? 5;
  const verified = new VerifiedTokens(options.cacheMs ?? 60_000);
  const required = options.requiredScopes ?? [];
  const types = options.typ === 'at+jwt' ? STRICT_TYPES : TYPES;
  const discovery = options.jwksUri === undefined ? new Discovery(issuer) : undefined;
  const jwksUri = async (): Promise<string> => {
    if (!discovery) return options.jwksUri!;
    const metadata = await discovery.metadata();
    if (typeof metadata.jwks_uri !== 'string') throw new Error(`the metadata of ${issuer} has no jwks_uri`);
    return metadata.jwks_uri;
  };
  const keys = new KeySet(jwksUri, options.jwksCooldownMs ?? 30_000);
  const verify = { issuer, algorithms, clockTolerance, requiredClaims: ['exp'] };
  return async function verifyJwt(token, ctx): Promise<AuthInfo> {
    let info = verified.get(token, ctx.resource);
    if (!info) {
      if (!isCompactJws(token)) throw new InvalidTokenError('the access token is not a valid JWT');
      let payload: JWTPayload;
      let typ: unknown;
      try {
        ({
          payload,
          protectedHeader: { typ },
        } = await jwtVerify(token, keys.getKey, { ...verify, audience: options.audience ?? ctx.resource }));
      } catch (error) {
        throw refusalOf(error);
      }
      if (!types.has(typeof typ === 'string' ? typ.toLowerCase().replace(/^application\//, '') : undefined)) {
        throw new InvalidTokenError('the access token is not typed as an access token (typ)');
      }
      if (typeof payload.iat === 'number' && payload.iat > Date.now() / 1000 + clockTolerance) {
        throw new InvalidTokenError('the access token is not valid yet (issued in the future)');
      }
      info = authInfoOf(token, payload, ctx.resource);
      verified.set(token, ctx.resource, info);
    }
    if (required.length > 0 && !required.every((s) => info.scopes.includes(s))) throw new InsufficientScopeError(required);
    return { ...info };
  };
}

/** The `typ` values accepted (lower-cased, without `application/`; `undefined`: none given): RFC 9068's, or also the untyped kinds most providers issue. */
const STRICT_TYPES = new Set<string | undefined>(['at+jwt']);
const TYPES = new Set<string | undefined>(['at+jwt', 'jwt', undefined]);

/** A base64url part (RFC 7515 §2: no padding) that decodes to bytes in one way only: its unused last bits are zero. */
function isCanonicalPart(part: string): boolean {
  if (!/^[A-Za-z0-9_-]+$/.test(part) || part.length % 4 === 1) return false;
  const last = BASE64URL.indexOf(part[part.length - 1]!);
  return part.length % 4 === 2 ? (last & 0x0f) === 0 : part.length % 4 === 3 ? (last & 0x03) === 0 : true;
}

const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/** A JWS in compact serialization, each of its three parts in its one spelling: a token has one form, and one cache entry. */
function isCompactJws(token: string): boolean {
  const parts = token.split('.');
  return parts.length === 3 && parts.every(isCanonicalPart);
}

/** Most verifications kept at once (a token is a few hundred bytes); the oldest goes first. */
const MAX_VERIFIED = 10_000;

/**
 * Tokens whose signature and claims were checked lately, by token and resource: reused until
 * `cacheMs` after the check or the token's `exp`, whichever comes first.
 */
class VerifiedTokens {
  private readonly entries = new Map<string, { resource: string; info: AuthInfo; until: number }>();

  constructor(private readonly cacheMs: number) {}

  get(token: string, resource: string): AuthInfo | undefined {
    const entry = this.entries.get(token);
    if (!entry) return undefined;
    if (entry.until > Date.now() && entry.resource === resource) return entry.info;
    this.entries.delete(token);
    return undefined;
  }

  set(token: string, resource: string, info: AuthInfo): void {
    if (this.cacheMs <= 0) return;
    const until = Math.min(Date.now() + this.cacheMs, info.expiresAt === undefined ? Infinity : info.expiresAt * 1000);
    if (this.entries.size >= MAX_VERIFIED) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(token, { resource, info, until });
  }
}

/** The identity a verified JWT stands for, in the SDK's `AuthInfo` shape. */
function authInfoOf(token: string, payload: JWTPayload, resource: string): AuthInfo {
  // RFC 9068's client_id; OpenID Connect's azp (Auth0's default profile, Entra ID v2, Keycloak); Okta's cid; Entra ID v1's appid.
  const clientId =
    [payload.client_id, payload.azp, payload.cid, payload.appid].find((c): c is string => typeof c === 'string' && c !== '') ?? '';
  const scope = payload.scope ?? payload.scp;
  const scopes =
    typeof scope === 'string' ? scope.split(' ').filter(Boolean) : Array.isArray(scope) ? scope.filter((s) => typeof s === 'string') : [];
  return { token, clientId, scopes, expiresAt: payload.exp, resource: new URL(resource), extra: { ...payload } };
}

/**
 * What a refused token tells the client: which check failed, in words of our own (jose's messages
 * quote claims). A failure to fetch the keys is not the token's fault and is thrown as it is (503).
 */
function refusalOf(error: unknown): Error {
  if (error instanceof errors.JWTExpired) return new InvalidTokenError('the access token expired');
  if (error instanceof errors.JWTClaimValidationFailed) {
    if (error.claim === 'nbf' || error.claim === 'iat') return new InvalidTokenError('the access token is not valid yet');
    if (error.claim === 'iss') return new InvalidTokenError('the access token was issued by another issuer');
    if (error.claim === 'aud') return new InvalidTokenError('the access token was issued for another resource (audience)');
    if (error.claim === 'exp') return new InvalidTokenError('the access token has no expiry (exp)');
    return new InvalidTokenError(`the access token's ${error.claim} claim is not valid`);
  }
  if (error instanceof errors.JWSSignatureVerificationFailed) return new InvalidTokenError('the access token signature does not verify');
  if (error instanceof errors.JWKSNoMatchingKey)
    return new InvalidTokenError('the access token is signed with a key the issuer does not publish');
  if (error instanceof errors.JWKSMultipleMatchingKeys) return new InvalidTokenError('the access token names no single key of the issuer');
  if (error instanceof errors.JOSEAlgNotAllowed)
    return new InvalidTokenError('the access token is signed with an algorithm this server does not accept');
  if (error instanceof errors.JWSInvalid || error instanceof errors.JWTInvalid || error instanceof errors.JOSENotSupported) {
    return new InvalidTokenError('the access token is not a valid JWT');
  }
  return error instanceof Error ? error : new Error(String(error));
}
