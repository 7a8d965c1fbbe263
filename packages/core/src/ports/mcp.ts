/**
 * The MCP and JSON-RPC shapes the engine works with, declared here so that neither SDK major is
 * a dependency: `@modelcontextprotocol/sdk` (v1) and `@modelcontextprotocol/server` (v2) are both
 * optional peers, and their own types are assignable to these.
 */

export type RequestId = string | number;

export interface JSONRPCRequest {
  jsonrpc: '2.0';
  id: RequestId;
  method: string;
  params?: Record<string, unknown>;
}

export interface JSONRPCNotification {
  jsonrpc: '2.0';
  method: string;
  params?: Record<string, unknown>;
}

export interface JSONRPCResultResponse {
  jsonrpc: '2.0';
  id: RequestId;
  result: Record<string, unknown>;
}

export interface JSONRPCErrorResponse {
  jsonrpc: '2.0';
  id?: RequestId;
  error: { code: number; message: string; data?: unknown };
}

export type JSONRPCMessage = JSONRPCRequest | JSONRPCNotification | JSONRPCResultResponse | JSONRPCErrorResponse;

/** Who made a request, as an auth middleware verified it; both SDK majors' `AuthInfo` fit. */
export interface AuthInfo {
  token: string;
  clientId: string;
  scopes: string[];
  expiresAt?: number;
  resource?: URL;
  extra?: Record<string, unknown>;
}

/**
 * What a transport hands a server with each message (both majors read it): v1 turns it into a
 * handler's `extra`, v2 into `ctx.http`.
 */
export interface MessageExtraInfo {
  authInfo?: AuthInfo;
  /** SDK v1: `extra.requestInfo`. */
  requestInfo?: { headers: Record<string, string | string[] | undefined>; url?: URL };
  /** SDK v2: `ctx.http.req`. */
  request?: Request;
  closeSSEStream?: (retryMs?: number) => boolean;
  closeStandaloneSSEStream?: (retryMs?: number) => boolean;
}

export interface TransportSendOptions {
  /** The request a message belongs to: it travels on that request's response stream. */
  relatedRequestId?: RequestId;
}

/** The SDK `Transport` contract, as both majors call it. */
export interface Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage, extra?: MessageExtraInfo) => void;
  sessionId?: string;
  start(): Promise<void>;
  send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void>;
  close(): Promise<void>;
}

/** The protocol versions of the 2025 era (sessions through `initialize`), newest first. */
export const LEGACY_VERSIONS: readonly string[] = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05', '2024-10-07'];
export const LATEST_LEGACY_VERSION = '2025-11-25';
