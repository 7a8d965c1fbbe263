/** JSON-RPC error codes used for transport-level rejections. */
export const ErrorCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
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
}

export const OK: Verdict = Object.freeze({ ok: true });

export function reject(status: number, code: number, message: string, headers?: Record<string, string>): Rejection {
  return headers ? { ok: false, status, code, message, headers } : { ok: false, status, code, message };
}

export function errorBody(code: number, message: string, id: string | number | null = null): string {
  return JSON.stringify({ jsonrpc: '2.0', id, error: { code, message } });
}
