import { ErrorCode, reject, type Rejection } from '../http/errors.js';
import { header } from '../http/rules.js';
import type { HeaderMap } from '../ports/http.js';

/**
 * The refusals of the resource server (RFC 6750 §3, RFC 9728 §5.1), as pure functions: each
 * carries the `WWW-Authenticate` challenge a client follows (where the metadata is, which scopes
 * to ask for) and a JSON-RPC error body whose `data` repeats the OAuth error.
 */

/** Where a bearer token came from: the header, or the refusal of a request that has none usable. */
export type BearerToken = { ok: true; token: string } | { ok: false; rejection: Rejection };

/** RFC 6750 §2.1's token68: what may follow `Bearer `. */
const TOKEN68 = /^[A-Za-z0-9\-._~+/]+=*$/;

/**
 * The request's bearer token, from `Authorization: Bearer …` only. A token in the query string
 * (`access_token=`) is refused with `400 invalid_request` even next to a valid header: OAuth 2.1
 * (§5.1.1) and MCP forbid it, since URLs end up in logs and `Referer`; RFC 6750 §3.1 names
 * `invalid_request` (not `401`) for a request that passes the token a way the server does not take,
 * and a `401` would only send the client through a new authorization that puts it there again.
 */
export function bearerToken(headers: HeaderMap, url: URL | undefined, resourceMetadata: string, scopes: string[]): BearerToken {
  if (url !== undefined && url.search !== '' && url.searchParams.has('access_token')) {
    const why = 'access tokens are accepted only in the Authorization header, never in the query string';
    return { ok: false, rejection: refusal(400, 'invalid_request', why, resourceMetadata, scopes) };
  }
  const value = header(headers, 'authorization');
  if (value === undefined || value.length < 7 || value.slice(0, 7).toLowerCase() !== 'bearer ') {
    return { ok: false, rejection: unauthorized(resourceMetadata, scopes) };
  }
  const token = value.slice(7).trim();
  if (!TOKEN68.test(token)) return { ok: false, rejection: invalidToken('the access token is malformed', resourceMetadata, scopes) };
  return { ok: true, token };
}

/** No credentials: `401` with where the metadata is and, when every request needs some, which scopes (RFC 6750 §3.1: no error code). */
export function unauthorized(resourceMetadata: string, scopes: string[]): Rejection {
  const params = [`resource_metadata=${quoted(resourceMetadata)}`];
  if (scopes.length > 0) params.push(`scope=${quoted(scopes.join(' '))}`);
  const rejection = reject(
    401,
    ErrorCode.ServerError,
    'Unauthorized: this MCP endpoint needs an OAuth access token (Authorization: Bearer)',
    {
      'www-authenticate': `Bearer ${params.join(', ')}`,
    },
  );
  rejection.data = { error: 'unauthorized', resource_metadata: resourceMetadata };
  return rejection;
}

/** A token refused by the verifier: `401 invalid_token`; the client gets a new one. */
export function invalidToken(description: string, resourceMetadata: string, scopes: string[]): Rejection {
  return refusal(401, 'invalid_token', description, resourceMetadata, scopes);
}

/** A valid token without the scopes the request needs: `403 insufficient_scope` naming all of them, so the client can step up. */
export function insufficientScope(needed: string[], resourceMetadata: string): Rejection {
  const description = `this request needs the scope ${needed.join(' ')}`;
  return refusal(403, 'insufficient_scope', description, resourceMetadata, needed);
}

/** The verifier failed (not the token): the authorization server may be unreachable. */
export function verifierUnavailable(retryAfterSec = 1): Rejection {
  return reject(503, ErrorCode.ServerError, 'Service Unavailable: the access token could not be checked now; retry later', {
    'retry-after': String(retryAfterSec),
  });
}

function refusal(status: number, error: string, description: string, resourceMetadata: string, scopes: string[]): Rejection {
  const params = [`error=${quoted(error)}`, `error_description=${quoted(description)}`];
  if (scopes.length > 0) params.push(`scope=${quoted(scopes.join(' '))}`);
  params.push(`resource_metadata=${quoted(resourceMetadata)}`);
  const reason = status === 400 ? 'Bad Request' : status === 401 ? 'Unauthorized' : 'Forbidden';
  const rejection = reject(status, ErrorCode.ServerError, `${reason}: ${description}`, {
    'www-authenticate': `Bearer ${params.join(', ')}`,
  });
  rejection.data =
    scopes.length > 0 && status === 403
      ? { error, error_description: description, scope: scopes.join(' ') }
      : { error, error_description: description };
  return rejection;
}

/** An RFC 9110 quoted-string: `"` and `\` escaped, anything outside printable ASCII dropped. */
function quoted(value: string): string {
  return `"${value.replace(/[^\x20-\x7e]/g, '').replace(/["\\]/g, '\\$&')}"`;
}
