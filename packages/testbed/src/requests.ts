/**
 * The JSON-RPC requests the raw clients send, of both protocol eras, built in one place: a 2025
 * request is the message alone (its session travels in headers); a 2026-07-28 request carries
 * the `_meta` envelope in its params and the routing headers beside it (SEP-2243).
 */

/** The revision of the session era (SEP-1699 polling; what SDK v1 speaks). */
export const LEGACY = '2025-11-25';
/** The revision without sessions, where long work becomes a task (SEP-2663). */
export const MODERN = '2026-07-28';

const CLIENT_INFO = { name: 'mcp-kit-testbed', version: '1.0.0' };

/** `initialize`, as a 2025 client opens its session. */
export function initializeRequest(id: number | string = 1, protocolVersion = LEGACY) {
  return { jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion, capabilities: {}, clientInfo: CLIENT_INFO } };
}

/** `tools/call` of `name` with `args` (and a `_meta`, e.g. a progress token or a 2026 envelope). */
export function callTool(id: number | string, name: string, args: Record<string, unknown> = {}, meta?: Record<string, unknown>) {
  return { jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args, ...(meta ? { _meta: meta } : {}) } };
}

/** What a 2026 request carries in `params._meta`. */
export interface Envelope {
  'io.modelcontextprotocol/protocolVersion'?: unknown;
  'io.modelcontextprotocol/clientCapabilities'?: unknown;
  'io.modelcontextprotocol/clientInfo'?: unknown;
  'io.modelcontextprotocol/logLevel'?: unknown;
  [key: string]: unknown;
}

/** The envelope of a 2026 request: revision, capabilities (none) and client, with `extra` over them. */
export function envelope(extra: Envelope = {}): Envelope {
  return {
    'io.modelcontextprotocol/protocolVersion': MODERN,
    'io.modelcontextprotocol/clientCapabilities': {},
    'io.modelcontextprotocol/clientInfo': CLIENT_INFO,
    ...extra,
  };
}

/** A request of the 2026 era: the envelope merged into `params._meta`. */
export function modernRequest(id: number | string, method: string, params: Record<string, unknown> = {}, meta: Envelope = envelope()) {
  const { _meta, ...rest } = params as { _meta?: Record<string, unknown> };
  return { jsonrpc: '2.0', id, method, params: { ...rest, _meta: { ...meta, ...(_meta ?? {}) } } };
}

/** The routing headers a 2026 client sends for a body (SEP-2243). */
export function routingHeaders(body: { method: string; params?: Record<string, unknown> }): Record<string, string> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': MODERN,
    'mcp-method': body.method,
  };
  const p = body.params ?? {};
  const name = body.method === 'resources/read' ? p.uri : body.method.startsWith('tasks/') ? p.taskId : p.name;
  if (['tools/call', 'prompts/get', 'resources/read', 'tasks/get', 'tasks/update', 'tasks/cancel'].includes(body.method))
    headers['mcp-name'] = String(name);
  return headers;
}
