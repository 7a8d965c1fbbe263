import { AuthorizationServerUnavailable, Backoff } from './backoff.js';

/**
 * An authorization server's metadata (RFC 8414), found from its issuer identifier: the
 * `oauth-authorization-server` well-known URL first, then OpenID Connect's `openid-configuration`
 * (appended to the issuer, then inserted before its path). Its `issuer` must be the configured one,
 * character for character (RFC 8414 §3.3): no trailing-slash normalisation, as tokens carry it.
 */
export interface AuthorizationServerMetadata {
  issuer: string;
  jwks_uri?: string;
  introspection_endpoint?: string;
  [key: string]: unknown;
}

/** A metadata request that takes longer than this fails (and is tried again by a later request). */
const TIMEOUT_MS = 5_000;

/** Where an issuer's metadata may be, in the order they are tried (RFC 8414 §3.1, then OpenID Connect's two forms). */
export function discoveryUrls(issuer: string): string[] {
  const url = new URL(issuer);
  const path = url.pathname === '/' ? '' : url.pathname.replace(/\/$/, '');
  return [
    `${url.origin}/.well-known/oauth-authorization-server${path}`,
    `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`,
    `${url.origin}/.well-known/openid-configuration${path}`,
  ].filter((u, i, all) => all.indexOf(u) === i);
}

/** The issuer's metadata from the first of {@link discoveryUrls} that is not 404; throws if none, or if it names another issuer. */
export async function fetchAuthorizationServerMetadata(issuer: string): Promise<AuthorizationServerMetadata> {
  const tried: string[] = [];
  for (const url of discoveryUrls(issuer)) {
    const response = await fetch(url, { headers: { accept: 'application/json' }, signal: AbortSignal.timeout(TIMEOUT_MS) });
    if (response.status === 404) {
      await response.body?.cancel();
      tried.push(url);
      continue;
    }
    if (!response.ok) throw new Error(`authorization server metadata at ${url} answered ${response.status}`);
    const metadata = (await response.json()) as AuthorizationServerMetadata;
    if (metadata?.issuer !== issuer) {
      throw new Error(
        `authorization server metadata at ${url} names the issuer ${JSON.stringify(metadata?.issuer)}, not ${JSON.stringify(issuer)}`,
      );
    }
    return metadata;
  }
  throw new Error(`no authorization server metadata for ${issuer} (404 at ${tried.join(', ')})`);
}

/**
 * One discovery per issuer and verifier, kept once it succeeded. One request at a time; after a
 * failure, none until the backoff says so (the requests meanwhile fail at once: `503`).
 */
export class Discovery {
  private found: AuthorizationServerMetadata | undefined;
  private fetching: Promise<AuthorizationServerMetadata> | undefined;
  private lastError: unknown;
  private readonly backoff = new Backoff();

  constructor(private readonly issuer: string) {}

  metadata(): Promise<AuthorizationServerMetadata> {
    if (this.found) return Promise.resolve(this.found);
    if (this.fetching) return this.fetching;
    if (!this.backoff.open) {
      return Promise.reject(
        AuthorizationServerUnavailable.backingOff('the authorization server metadata request', this.backoff, this.lastError),
      );
    }
    const fetching = fetchAuthorizationServerMetadata(this.issuer).then(
      (metadata) => {
        this.found = metadata;
        this.backoff.succeeded();
        return metadata;
      },
      (error: unknown) => {
        this.lastError = error;
        this.backoff.failed();
        throw error;
      },
    );
    this.fetching = fetching;
    void fetching.then(
      () => (this.fetching = undefined),
      () => (this.fetching = undefined),
    );
    return fetching;
  }
}
