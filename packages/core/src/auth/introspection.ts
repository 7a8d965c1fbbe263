import type { AuthInfo } from '../ports/mcp.js';
import { AuthorizationServerUnavailable, Backoff } from './backoff.js';
import { Discovery } from './discovery.js';
import { InvalidTokenError } from './errors.js';
import type { TokenVerifier } from './options.js';

/** Options of {@link introspectionVerifier}: where to ask, as whom, and how long an answer holds. */
export interface IntrospectionVerifierOptions {
  /** The authorization server's issuer identifier: its `introspection_endpoint` is read from its metadata (RFC 8414). Give this or `endpoint`. */
  issuer?: string;
  /** The introspection endpoint itself (RFC 7662). */
  endpoint?: string;
  /** This resource server's client credentials at the authorization server (`client_secret_basic`). */
  clientId: string;
  clientSecret: string;
  /**
   * How long an active token's answer is reused, in ms; never past the token's `exp`. Default
   * `30_000`. A revoked token is refused at the latest this long after its revocation.
   */
  cacheMs?: number;
  /**
   * The audience an active token must name (its `aud`). Default: the endpoint's resource (RFC
   * 8707). `false` accepts tokens whatever their audience, for an authorization server that does
   * not say it; only then may a token issued for another resource be used here.
   */
  audience?: string | false;
  /** An introspection that takes longer than this fails (`503`). Default `5_000` ms. */
  timeoutMs?: number;
  /**
   * How long an inactive token's answer is reused, in ms: a client (or an attacker) that sends
   * a dead token again costs the authorization server nothing more. Default `5_000`.
   */
  inactiveCacheMs?: number;
  /**
   * Most introspections sent per second (tokens not answered from the cache): a flood of made-up
   * opaque tokens costs the authorization server this much at most; tokens over it get `503` with
   * `Retry-After`. A failing endpoint is asked again after 1 s, then twice as long after each
   * failure (up to a minute), and tokens not in the cache meanwhile get `503`. Default `50`.
   */
  maxPerSecond?: number;
}

interface Introspected {
  active?: unknown;
  scope?: unknown;
  client_id?: unknown;
  sub?: unknown;
  exp?: unknown;
  nbf?: unknown;
  aud?: unknown;
  iss?: unknown;
  [claim: string]: unknown;
}

/** Most answers kept at once; the oldest goes first. */
const MAX_CACHED = 10_000;

const INACTIVE = 'the access token is not active (expired, revoked or unknown)';

/**
 * Introspections as the authorization server can bear them: none during a failure's backoff, at
 * most `rate` a second otherwise; what may not be sent now fails at once (`503`).
 */
class Paced {
  private readonly budget: PerSecond;
  private readonly backoff = new Backoff();
  private lastError: unknown;

  constructor(rate: number) {
    this.budget = new PerSecond(rate);
  }

  async send<T>(request: () => Promise<T>): Promise<T> {
    if (!this.backoff.open) throw AuthorizationServerUnavailable.backingOff('token introspection', this.backoff, this.lastError);
    if (!this.budget.take()) {
      throw new AuthorizationServerUnavailable("token introspection: this second's introspections (maxPerSecond) are spent", 1);
    }
    try {
      const answered = await request();
      this.backoff.succeeded();
      return answered;
    } catch (error) {
      this.lastError = error;
      this.backoff.failed();
      throw error;
    }
  }
}

/**
 * A budget of requests per second, refilled continuously (a token bucket that holds one second's
 * worth): {@link take} says whether one more may go now.
 */
class PerSecond {
  private tokens: number;
  private at = Date.now();

  constructor(private readonly rate: number) {
    if (!Number.isFinite(rate) || rate <= 0)
      throw new TypeError(`introspectionVerifier: maxPerSecond must be a positive number, got ${rate}`);
    this.tokens = rate;
  }

  take(): boolean {
    const now = Date.now();
    this.tokens = Math.min(this.rate, this.tokens + ((now - this.at) / 1000) * this.rate);
    this.at = now;
    if (this.tokens < 1) return false;
    this.tokens--;
    return true;
  }
}

/**
 * Verifies opaque access tokens by asking the authorization server (RFC 7662 token introspection):
 * a form POST with this resource server's client credentials; `active: false` refuses the token.
 * An active answer is kept for `cacheMs` (never past `exp`), and concurrent requests with one token
 * share one introspection. `clientId` is the answer's `client_id`, `scopes` its `scope`, and every
 * member of the answer is in `extra` (`extra.sub` the user).
 *
 * @example
 * ```ts source="../../examples/core.examples.ts#introspectionVerifier"
 * const verifier = introspectionVerifier({
 *   issuer: 'https://as.example.com',
 *   clientId: 'mcp-api',
 *   clientSecret: process.env.INTROSPECTION_SECRET!,
 * });
 * ```
 */
export function introspectionVerifier(options: IntrospectionVerifierOptions): TokenVerifier {
  const { issuer, endpoint, clientId, clientSecret } = options;
  if ((issuer === undefined) === (endpoint === undefined)) throw new TypeError('introspectionVerifier: give either issuer or endpoint');
  if (typeof clientId !== 'string' || typeof clientSecret !== 'string')
    throw new TypeError('introspectionVerifier: clientId and clientSecret must be strings');
  const cacheMs = options.cacheMs ?? 30_000;
  const timeoutMs = options.timeoutMs ?? 5_000;
  const discovery = issuer === undefined ? undefined : new Discovery(issuer);
  // RFC 6749 §2.3.1: each part form-encoded before the Basic encoding.
  const basic = `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(clientSecret)}`).toString('base64')}`;
  const inactiveCacheMs = options.inactiveCacheMs ?? 5_000;
  const cache = new Map<string, { info: AuthInfo; until: number; audience: unknown }>();
  /** Tokens the server called inactive lately, until when. */
  const inactive = new Map<string, number>();
  const pending = new Map<string, Promise<{ answer: Introspected; at: number }>>();
  const paced = new Paced(options.maxPerSecond ?? 50);

  const ask = async (token: string): Promise<{ answer: Introspected; at: number }> => {
    const url = endpoint ?? (await discovery!.metadata()).introspection_endpoint;
    if (typeof url !== 'string') throw new Error(`the metadata of ${issuer} has no introspection_endpoint`);
    const response = await fetch(url, {
      method: 'POST',
      headers: { authorization: basic, 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: new URLSearchParams({ token, token_type_hint: 'access_token' }).toString(),
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (!response.ok) {
      await response.body?.cancel();
      throw new Error(`token introspection at ${url} answered ${response.status}`);
    }
    return { answer: (await response.json()) as Introspected, at: Date.now() };
  };
  const introspect = (token: string) => paced.send(() => ask(token));

  return async function verifyByIntrospection(token, ctx): Promise<AuthInfo> {
    const audience = options.audience === undefined ? ctx.resource : options.audience;
    const now = Date.now();
    const cached = cache.get(token);
    if (cached && cached.until > now) {
      checkAudience(cached.audience, audience);
      return cached.info;
    }
    if (cached) cache.delete(token);
    const dead = inactive.get(token);
    if (dead !== undefined && dead > now) throw new InvalidTokenError(INACTIVE);
    if (dead !== undefined) inactive.delete(token);
    let asking = pending.get(token);
    if (!asking) {
      asking = introspect(token).finally(() => pending.delete(token));
      pending.set(token, asking);
    }
    const { answer, at } = await asking;
    if (answer?.active !== true && inactiveCacheMs > 0) {
      if (inactive.size >= MAX_CACHED) inactive.delete(inactive.keys().next().value!);
      inactive.set(token, at + inactiveCacheMs);
    }
    const info = activeInfo(token, answer, issuer, ctx.resource);
    checkAudience(answer.aud, audience);
    const until = Math.min(at + cacheMs, typeof answer.exp === 'number' ? answer.exp * 1000 : Infinity);
    if (cacheMs > 0 && until > Date.now()) {
      if (cache.size >= MAX_CACHED) cache.delete(cache.keys().next().value!);
      cache.set(token, { info, until, audience: answer.aud });
    }
    return info;
  };
}

function activeInfo(token: string, answer: Introspected, issuer: string | undefined, resource: string): AuthInfo {
  if (answer?.active !== true) throw new InvalidTokenError(INACTIVE);
  const now = Date.now() / 1000;
  if (typeof answer.exp === 'number' && answer.exp <= now) throw new InvalidTokenError('the access token expired');
  if (typeof answer.nbf === 'number' && answer.nbf > now + 5) throw new InvalidTokenError('the access token is not valid yet');
  if (issuer !== undefined && answer.iss !== undefined && answer.iss !== issuer) {
    throw new InvalidTokenError('the access token was issued by another issuer');
  }
  const scopes = typeof answer.scope === 'string' ? answer.scope.split(' ').filter(Boolean) : [];
  return {
    token,
    clientId: typeof answer.client_id === 'string' ? answer.client_id : '',
    scopes,
    expiresAt: typeof answer.exp === 'number' ? answer.exp : undefined,
    resource: new URL(resource),
    extra: { ...answer },
  };
}

function checkAudience(aud: unknown, audience: string | false): void {
  if (audience === false) return;
  const named = Array.isArray(aud) ? aud : [aud];
  if (!named.includes(audience)) throw new InvalidTokenError('the access token was issued for another resource (audience)');
}
