import type { CoreResponder } from '../ports/http.js';
import { JSON_HEADERS } from '../streams/frames.js';
import { SERVER_INFO_KEY } from './envelope.js';
import type { Handshake } from './server-pool.js';

/** Results a client may cache, which must say for how long and for whom (2026-07-28 `CacheableResult`). */
const CACHEABLE = new Set(['tools/list', 'prompts/list', 'resources/list', 'resources/templates/list', 'resources/read']);

/**
 * Gives a result the fields every 2026-era result has, where the server did not: SDK v2 stamps
 * them itself; SDK v1 knows nothing of them. `resultType`, cache hints on cacheable results (0 ms,
 * private: the server said nothing about caching), and the server's identity in `_meta`. Fields of
 * the 2025 era that the 2026 schema dropped go (a tool's `execution`, a result's empty `content`
 * beside `input_required`).
 */
export function stampResult(method: string, result: Record<string, unknown>, handshake: Handshake): void {
  result.resultType ??= 'complete';
  if (CACHEABLE.has(method)) {
    result.ttlMs ??= 0;
    result.cacheScope ??= 'private';
  }
  const meta = (result._meta ??= {}) as Record<string, unknown>;
  meta[SERVER_INFO_KEY] ??= handshake.serverInfo;
  if (result.resultType === 'input_required' && Array.isArray(result.content) && result.content.length === 0) delete result.content;
  if (method === 'tools/list' && Array.isArray(result.tools)) {
    for (const tool of result.tools as Array<Record<string, unknown>>) delete tool.execution;
  }
}

/** 2026 renamed "resource not found" (-32002) to invalid params (-32602). */
export function recodeError(error: { code: number }): void {
  if (error.code === -32002) error.code = -32602;
}

/**
 * The HTTP status of an error answered as a JSON body: the revision gives the transport-level
 * ones their own (a method this server does not have is 404), an error of the handler is 200.
 */
export function httpStatusOf(code: number): number {
  switch (code) {
    case -32601:
      return 404;
    case -32700:
    case -32600:
    case -32020:
    case -32021:
    case -32022:
      return 400;
    default:
      return 200;
  }
}

/** The client capability each kind of input request needs (SEP-2322). */
const NEEDS: Readonly<Record<string, string>> = {
  'elicitation/create': 'elicitation',
  'sampling/createMessage': 'sampling',
  'roots/list': 'roots',
};

/**
 * The capabilities an `input_required` result asks of a client that did not declare them;
 * `undefined` when it asks nothing the client cannot answer.
 */
export function missingCapabilities(
  result: Record<string, unknown>,
  declared: Record<string, unknown>,
): Record<string, object> | undefined {
  if (result.resultType !== 'input_required' || typeof result.inputRequests !== 'object' || result.inputRequests === null) return undefined;
  let missing: Record<string, object> | undefined;
  for (const request of Object.values(result.inputRequests as Record<string, { method?: string }>)) {
    const capability = NEEDS[request?.method ?? ''];
    if (capability !== undefined && declared[capability] === undefined) (missing ??= {})[capability] = {};
  }
  return missing;
}

export function missingCapabilityError(missing: Record<string, object>): { code: number; message: string; data: unknown } {
  return {
    code: -32021,
    message: `Missing required client capability: this request needs ${Object.keys(missing).join(', ')}, which the client did not declare`,
    data: { requiredCapabilities: missing },
  };
}

/** Answers a 2026 request with a result mcp-kit built itself (discover, task surface). */
export function sendResult(res: CoreResponder, id: string | number, result: Record<string, unknown>): void {
  res.send(200, JSON_HEADERS, JSON.stringify({ jsonrpc: '2.0', id, result }));
}

/** The `_meta` key of a tool result that stands for a JSON-RPC error (see {@link protocolError}). */
export const ERROR_META_KEY = 'mcp-kit/error';

/**
 * A tool result that stands for a JSON-RPC error. Both SDKs turn whatever a tool throws into a
 * result with `isError: true` (a tool error the model may read); a tool that must fail the
 * request itself (a protocol error: a task then ends `failed`, not `completed`) returns this. For
 * 2026-07-28 clients mcp-kit answers with the error; a 2025 session gets the `isError` result.
 */
export function protocolError(error: { code: number; message: string; data?: unknown }): {
  content: Array<{ type: 'text'; text: string }>;
  isError: true;
  _meta: Record<string, unknown>;
} {
  return { content: [{ type: 'text', text: error.message }], isError: true, _meta: { [ERROR_META_KEY]: error } };
}

/** The JSON-RPC error a tool result stands for, if it is one made by {@link protocolError}. */
export function errorInResult(result: Record<string, unknown>): { code: number; message: string; data?: unknown } | undefined {
  if (result.isError !== true) return undefined;
  const error = (result._meta as Record<string, unknown> | undefined)?.[ERROR_META_KEY] as
    { code?: unknown; message?: unknown } | undefined;
  if (!error || typeof error.code !== 'number' || typeof error.message !== 'string') return undefined;
  return error as { code: number; message: string; data?: unknown };
}
