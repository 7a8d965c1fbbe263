import type { CoreResponder } from '../ports/http.js';

/** JSON-RPC error codes used for transport-level rejections. */
export const ErrorCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  InternalError: -32603,
  /** Transport-level refusal (bad header, method, size...). The SDK uses the same code. */
  ServerError: -32000,
  SessionNotFound: -32001,
} as const;

/** A rule's verdict on a request: go on, or answer with this status and JSON-RPC error. */
export type Verdict = { ok: true } | Rejection;

export interface Rejection {
  ok: false;
  status: number;
  code: number;
  message: string;
  headers?: Record<string, string>;
  /** The error's `data` (the 2026 revision's errors carry what the client needs to recover). */
  data?: unknown;
}

export const OK: Verdict = Object.freeze({ ok: true });

export function reject(status: number, code: number, message: string, headers?: Record<string, string>): Rejection {
  return headers ? { ok: false, status, code, message, headers } : { ok: false, status, code, message };
}

/**
 * A JSON-RPC error body. `id` is the request's when it could be read and may be echoed; otherwise
 * the member is left out, as both the 2025-11-25 and the 2026-07-28 schemas say (`id` is optional
 * on an error response and never `null`).
 */
export function errorBody(code: number, message: string, id?: string | number, data?: unknown): string {
  const error = data === undefined ? { code, message } : { code, message, data };
  return JSON.stringify(id === undefined ? { jsonrpc: '2.0', error } : { jsonrpc: '2.0', id, error });
}

const JSON_HEADERS = { 'content-type': 'application/json' };

/**
 * Answers a request with a rejection: its status, its headers, and a JSON-RPC error body, with the
 * request's `id` where it was read and may be echoed.
 */
export function sendRejection(res: CoreResponder, r: Rejection, id?: string | number): void {
  res.send(r.status, r.headers ? { ...JSON_HEADERS, ...r.headers } : JSON_HEADERS, errorBody(r.code, r.message, id, r.data));
}

// --- The rejections more than one path gives ------------------------------------------------------

/** A dependency (the event store, the session directory) failed; the client should retry soon. */
export function unavailable(what: string): Rejection {
  return reject(503, ErrorCode.ServerError, `Service Unavailable: ${what} is unavailable; retry later`, { 'retry-after': '1' });
}

export function sessionNotFound(why = 'it expired or was deleted'): Rejection {
  return reject(404, ErrorCode.SessionNotFound, `Session not found: ${why}; initialize a new session`);
}

export function foreignPrincipal(): Rejection {
  return reject(403, ErrorCode.ServerError, 'Forbidden: this session belongs to another principal');
}

export function malformedCursor(lastEventId: string): Rejection {
  return reject(400, ErrorCode.InvalidRequest, `Bad Request: malformed Last-Event-ID ${JSON.stringify(lastEventId.slice(0, 80))}`);
}

/** A `Last-Event-ID` the store cannot replay from: never a partial history. */
export function replayRejection(reason: 'unknown' | 'evicted'): Rejection {
  return reason === 'evicted'
    ? reject(
        410,
        ErrorCode.ServerError,
        'Gone: the events after this Last-Event-ID were evicted by the event store retention limits; this stream cannot be resumed without loss',
      )
    : reject(
        404,
        ErrorCode.ServerError,
        "Not Found: Last-Event-ID names no event of this session (unknown, another session's, or past the end of its stream)",
      );
}
