import type { AuthInfo } from '../ports/mcp.js';
import type { HeaderMap } from '../ports/http.js';
import { ErrorCode, OK, reject, type Verdict } from './errors.js';

export function header(headers: HeaderMap, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
}

export const ALLOWED_METHODS = 'GET, POST, DELETE';

export function checkMethod(method: string, stateless: boolean): Verdict {
  if (method === 'POST') return OK;
  if (!stateless && (method === 'GET' || method === 'DELETE')) return OK;
  const allow = stateless ? 'POST' : ALLOWED_METHODS;
  const why = stateless && (method === 'GET' || method === 'DELETE') ? ' (this endpoint is stateless)' : '';
  return reject(405, ErrorCode.ServerError, `Method not allowed: ${method}${why}. Use ${allow}.`, { allow });
}

function accepts(accept: string, type: string): boolean {
  const [major] = type.split('/');
  for (const part of accept.split(',')) {
    const [mediaPart, ...params] = part.split(';');
    const media = (mediaPart ?? '').trim().toLowerCase();
    if (media !== type && media !== '*/*' && media !== `${major}/*`) continue;
    // q=0 means "not acceptable" (RFC 9110 §12.4.2).
    const q = params.map((p) => p.trim().toLowerCase()).find((p) => p.startsWith('q='));
    if (q === undefined || Number(q.slice(2)) > 0) return true;
  }
  return false;
}

// A client sends the same Accept on every request: remember the last value each method accepted,
// so the hot path compares one string instead of splitting and lower-casing it twice per POST.
let acceptedByPost: string | undefined;
let acceptedByGet: string | undefined;

/** POST must accept both JSON and SSE (the server picks); GET must accept SSE. */
export function checkAccept(method: 'GET' | 'POST', accept: string | undefined): Verdict {
  const value = accept ?? '';
  if (method === 'GET') {
    if (value === acceptedByGet) return OK;
    if (accepts(value, 'text/event-stream')) {
      acceptedByGet = value;
      return OK;
    }
    return reject(406, ErrorCode.ServerError, 'Not Acceptable: a GET must accept text/event-stream');
  }
  if (value === acceptedByPost) return OK;
  if (accepts(value, 'application/json') && accepts(value, 'text/event-stream')) {
    acceptedByPost = value;
    return OK;
  }
  return reject(406, ErrorCode.ServerError, 'Not Acceptable: a POST must accept both application/json and text/event-stream');
}

export function checkContentType(contentType: string | undefined): Verdict {
  if (contentType === 'application/json') return OK;
  const media = (contentType ?? '').split(';')[0]?.trim().toLowerCase();
  if (media === 'application/json') return OK;
  return reject(
    415,
    ErrorCode.ServerError,
    `Unsupported Media Type: Content-Type must be application/json, got ${contentType ? JSON.stringify(contentType) : 'none'}`,
  );
}

export function checkProtocolVersion(version: string | undefined, supported: readonly string[]): Verdict {
  if (version === undefined || supported.includes(version)) return OK;
  return reject(
    400,
    ErrorCode.ServerError,
    `Unsupported MCP-Protocol-Version: ${JSON.stringify(version)}. Supported: ${supported.join(', ')}`,
  );
}

/** Options of the DNS-rebinding check. */
export interface HostCheck {
  /** Host names (without port) accepted in `Host`. */
  allowedHosts: readonly string[];
  /** Origins (`scheme://host[:port]`) or bare host names accepted in `Origin`. */
  allowedOrigins: readonly string[];
}

export const LOCAL_HOSTS: readonly string[] = ['localhost', '127.0.0.1', '[::1]'];

/** A `Host` header value, parsed: the name (lower-cased; an IPv6 literal keeps its brackets) and the port if it names one. */
export interface HostPort {
  hostname: string;
  port: number | undefined;
}

/** RFC 3986 §3.2.2 reg-name, narrowed to unreserved characters (no percent-encoding or sub-delims: no name of ours has them). */
const REG_NAME = /^[a-z0-9\-._~]+$/;
const IPV6_LITERAL = /^\[[0-9a-f:.]+\]$/;

/**
 * Parses a `Host` header (RFC 9110 §7.2: `uri-host [ ":" port ]`), or `undefined` when it is not
 * one: two values, a port that is not a number from 1 to 65535, a name with characters no host
 * name has, an IPv6 address outside brackets. RFC 9112 §3.2 answers such a request `400`.
 */
export function parseHost(value: string | undefined): HostPort | undefined {
  if (value === undefined || value.length === 0 || value.length > 300) return undefined;
  const h = value.toLowerCase();
  const close = h.startsWith('[') ? h.indexOf(']') : -1;
  const colon = h.indexOf(':', close + 1);
  const hostname = colon === -1 ? h : h.slice(0, colon);
  let port: number | undefined;
  if (colon !== -1) {
    const digits = h.slice(colon + 1);
    if (!/^[0-9]{1,5}$/.test(digits)) return undefined;
    port = Number(digits);
    if (port < 1 || port > 65_535) return undefined;
  }
  if (IPV6_LITERAL.test(hostname)) {
    // The URL parser knows IPv6 syntax in full (and `::ffff:…` forms); a bracketed non-address fails it.
    if (!URL.canParse(`http://${hostname}/`)) return undefined;
  } else if (!REG_NAME.test(hostname)) return undefined;
  return { hostname, port };
}

let lastParsedHost: string | undefined;

/** A `Host` header that does not parse (see {@link parseHost}): `400`, before anything reads it. */
export function checkHostSyntax(value: string | undefined): Verdict {
  // A client sends the same Host on every request: the last one that parsed is not parsed again.
  if (value === undefined || value === lastParsedHost) return OK;
  if (parseHost(value)) {
    lastParsedHost = value;
    return OK;
  }
  return reject(400, ErrorCode.ServerError, `Bad Request: the Host header ${JSON.stringify(value.slice(0, 100))} is not a host[:port]`);
}

/** Host name of a `Host` header value, lower-cased, without port. */
export function hostName(hostHeader: string): string {
  const h = hostHeader.trim().toLowerCase();
  if (h.startsWith('[')) {
    const end = h.indexOf(']');
    return end === -1 ? h : h.slice(0, end + 1);
  }
  const colon = h.indexOf(':');
  return colon === -1 ? h : h.slice(0, colon);
}

/**
 * DNS-rebinding protection: a page on a hostile domain that resolves to 127.0.0.1 sends its own
 * name in `Host` and `Origin`; a local server accepts only local names.
 */
export function checkHostAndOrigin(host: string | undefined, origin: string | undefined, check: HostCheck): Verdict {
  if (host === undefined || !check.allowedHosts.includes(hostName(host))) {
    return reject(
      403,
      ErrorCode.ServerError,
      `Forbidden: Host ${JSON.stringify(host ?? '')} is not allowed (DNS-rebinding protection; see allowedHosts)`,
    );
  }
  if (origin !== undefined && origin !== 'null') {
    let originHost: string;
    try {
      originHost = new URL(origin).host.toLowerCase();
    } catch {
      return reject(403, ErrorCode.ServerError, `Forbidden: malformed Origin ${JSON.stringify(origin)}`);
    }
    const normalized = origin.toLowerCase().replace(/\/$/, '');
    const ok = check.allowedOrigins.includes(normalized) || check.allowedOrigins.includes(hostName(originHost));
    if (!ok) {
      return reject(
        403,
        ErrorCode.ServerError,
        `Forbidden: Origin ${JSON.stringify(origin)} is not allowed (DNS-rebinding protection; see allowedOrigins)`,
      );
    }
  }
  return OK;
}

export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false;
  return address === '::1' || address.startsWith('127.') || address.startsWith('::ffff:127.');
}

/**
 * The identity a session is bound to: the auth info's `clientId` and its `extra.sub` (a user behind
 * a shared client); `undefined` for an anonymous request.
 */
export function principalOf(authInfo: AuthInfo | undefined): string | undefined {
  if (!authInfo) return undefined;
  const sub = (authInfo.extra as { sub?: unknown } | undefined)?.sub;
  return `${authInfo.clientId}\u0000${typeof sub === 'string' ? sub : ''}`;
}
