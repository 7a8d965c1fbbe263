import { LEGACY_VERSIONS } from '../ports/mcp.js';
import { ErrorCode, reject, type Rejection } from '../http/errors.js';
import { header } from '../http/rules.js';
import { claimsModern, ModernErrorCode, MODERN_VERSIONS, PROTOCOL_VERSION_KEY } from '../modern/envelope.js';
import type { ProtocolEra } from '../options.js';
import type { HeaderMap } from '../ports/http.js';

/**
 * Which era a POST belongs to. The body decides (SEP-2575): a message whose `_meta` names a
 * protocol version is a 2026-07-28 request, anything else (an `initialize`, a session's request,
 * a response) belongs to the 2025 era; the `MCP-Protocol-Version` header only cross-checks.
 */
export function classifyPost(body: unknown, headers: HeaderMap): ProtocolEra | Rejection {
  if (Array.isArray(body)) {
    if (body.some(claimsModern)) return reject(400, ErrorCode.InvalidRequest, 'Invalid Request: a batch cannot carry a 2026-07-28 request');
    return 'legacy';
  }
  if (claimsModern(body)) return 'modern';
  const version = header(headers, 'mcp-protocol-version');
  const isRequest = typeof body === 'object' && body !== null && 'method' in body && 'id' in body;
  // A dated version from 2026-07-28 on names the modern era: its request must carry the envelope.
  // (Anything else in the header is an unsupported version, refused on the 2025 path.)
  if (version !== undefined && /^\d{4}-\d{2}-\d{2}$/.test(version) && version >= MODERN_VERSIONS[0]! && isRequest) {
    return reject(
      400,
      ModernErrorCode.InvalidParams,
      `Invalid params: MCP-Protocol-Version ${JSON.stringify(version)} needs the request's _meta envelope (${PROTOCOL_VERSION_KEY})`,
    );
  }
  return 'legacy';
}

/**
 * A request of an era this endpoint does not serve (see `eras`): -32022 with the versions it does
 * serve, which tells a client that speaks both which way to go.
 */
export function eraNotServed(era: ProtocolEra, body: unknown, headers: HeaderMap): Rejection {
  const supported = era === 'modern' ? [...LEGACY_VERSIONS] : [...MODERN_VERSIONS];
  const params = (body as { params?: { protocolVersion?: unknown; _meta?: Record<string, unknown> } } | null)?.params;
  const claimed = era === 'modern' ? params?._meta?.[PROTOCOL_VERSION_KEY] : params?.protocolVersion;
  const requested = typeof claimed === 'string' ? claimed : (header(headers, 'mcp-protocol-version') ?? '2025-03-26');
  const rejection = reject(
    400,
    ModernErrorCode.UnsupportedProtocolVersion,
    `Unsupported protocol version: ${requested} (this endpoint serves ${supported.join(', ')})`,
  );
  rejection.data = { supported, requested };
  return rejection;
}
