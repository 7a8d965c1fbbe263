/**
 * When to ask a failing authorization server again: once a second after its first failure, then
 * twice as long after each further one, up to a minute; at once again after a success. Requests
 * meanwhile get the failure (`503`) without a request of their own: a flood against the resource
 * server never becomes a flood against an authorization server that is already struggling.
 */
export class Backoff {
  private failures = 0;
  private until = 0;

  constructor(
    private readonly firstMs = 1_000,
    private readonly maxMs = 60_000,
  ) {}

  /** Whether a request may be sent now. */
  get open(): boolean {
    return Date.now() >= this.until;
  }

  /** How long until one may, in whole seconds (a `Retry-After`). */
  get retryAfterSec(): number {
    return Math.max(1, Math.ceil((this.until - Date.now()) / 1000));
  }

  failed(): void {
    this.until = Date.now() + Math.min(this.maxMs, this.firstMs * 2 ** Math.min(this.failures, 16));
    this.failures++;
  }

  succeeded(): void {
    this.failures = 0;
    this.until = 0;
  }
}

/**
 * The authorization server is not asked now: it failed lately and the {@link Backoff} has not
 * passed, or the requests allowed this second are spent. A `503` with `Retry-After`, not the
 * token's fault, and not reported again (a failure was, when it happened).
 */
export class AuthorizationServerUnavailable extends Error {
  override readonly name = 'AuthorizationServerUnavailable';

  constructor(
    message: string,
    readonly retryAfterSec: number,
    cause?: unknown,
  ) {
    super(message, { cause });
  }

  /** `what` failed lately, and `backoff` says not to ask again yet. */
  static backingOff(what: string, backoff: Backoff, cause: unknown): AuthorizationServerUnavailable {
    const why = (cause as Error | undefined)?.message ?? String(cause);
    return new AuthorizationServerUnavailable(`${what} failed lately and is not asked again yet: ${why}`, backoff.retryAfterSec, cause);
  }
}
