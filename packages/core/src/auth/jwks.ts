import { createLocalJWKSet, errors, type JWTVerifyGetKey } from 'jose';
import { AuthorizationServerUnavailable, Backoff } from './backoff.js';

/** How often keys are fetched again while they serve, and how long past that they may serve while the issuer fails. */
const REFRESH_MS = 10 * 60_000;
const STALE_MS = 60 * 60_000;
/** A JWKS request that takes longer than this fails. */
const TIMEOUT_MS = 5_000;

type GetKey = (header: Parameters<JWTVerifyGetKey>[0], token: Parameters<JWTVerifyGetKey>[1]) => ReturnType<JWTVerifyGetKey>;

/**
 * An issuer's keys (its JWKS, RFC 7517), fetched once and kept. Refreshed every 10 minutes, or
 * sooner when a token names a key they lack (a rotation: at most once per `cooldownMs`, so that
 * tokens with made-up key ids cost the issuer one request per cooldown, not one each). When the
 * issuer fails, requests back off ({@link Backoff}) and the last keys it served keep verifying
 * tokens up to an hour after they were fetched; a token they cannot verify meanwhile is not
 * refused (`401`, the client would authorize again for nothing) but answered `503`. One fetch at a
 * time, whatever the number of requests waiting for it.
 */
export class KeySet {
  private keys: GetKey | undefined;
  private fetchedAt = 0;
  private fetching: Promise<void> | undefined;
  private lastError: unknown;
  private readonly backoff = new Backoff();

  constructor(
    /** Where the keys are (resolved at the first fetch: the issuer's metadata may name it). */
    private readonly uri: () => Promise<string>,
    private readonly cooldownMs: number,
  ) {}

  /** The key a token's header names, as `jwtVerify` asks for it. */
  readonly getKey: GetKey = async (header, token) => {
    const now = Date.now();
    if (!this.keys || now - this.fetchedAt >= REFRESH_MS) await this.refresh(now);
    try {
      return await this.keys!(header, token);
    } catch (error) {
      if (!(error instanceof errors.JWKSNoMatchingKey)) throw error;
      // A key the set lacks: a rotation, or a made-up key id. Fetched again at most once per cooldown.
      if (Date.now() - this.fetchedAt < this.cooldownMs) throw error;
      await this.refresh(Date.now(), true);
      return this.keys!(header, token);
    }
  };

  /**
   * Fetches the keys, unless the issuer failed lately (backing off). With keys that may still
   * serve, a failure keeps them, unless the fetch was for a key they lack (`required`).
   */
  private async refresh(now: number, required = false): Promise<void> {
    const usable = this.keys !== undefined && now - this.fetchedAt < STALE_MS;
    // The request that sends the fetch hears how it failed (and reports it); those that waited for it, that it did.
    const sends = !this.fetching && this.backoff.open;
    if (sends) this.fetching = this.fetch().finally(() => (this.fetching = undefined));
    if (this.fetching) {
      try {
        await this.fetching;
        return;
      } catch (error) {
        if (usable && !required) return;
        if (sends) throw error;
      }
    }
    if (usable && !required) return;
    throw AuthorizationServerUnavailable.backingOff('the JWKS request', this.backoff, this.lastError);
  }

  private async fetch(): Promise<void> {
    try {
      const uri = await this.uri();
      const response = await fetch(uri, { headers: { accept: 'application/json' }, signal: AbortSignal.timeout(TIMEOUT_MS) });
      if (!response.ok) {
        await response.body?.cancel();
        throw new Error(`the JWKS at ${uri} answered ${response.status}`);
      }
      this.keys = createLocalJWKSet((await response.json()) as Parameters<typeof createLocalJWKSet>[0]);
      this.fetchedAt = Date.now();
      this.backoff.succeeded();
    } catch (error) {
      this.lastError = error;
      this.backoff.failed();
      throw error;
    }
  }
}
