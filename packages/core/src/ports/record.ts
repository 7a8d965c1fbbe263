/** What restores a session on another instance (see `SessionDirectory.saveRecord`). */
export interface RestoreRecord {
  /** The client's `initialize` request, replayed to the new server. */
  initialize: { jsonrpc: '2.0'; id: string | number; method: 'initialize'; params?: Record<string, unknown> };
  /** The params of the client's last `logging/setLevel`. */
  loggingLevel?: Record<string, unknown>;
  /** The params of each `resources/subscribe` the client has not taken back. */
  subscriptions?: Record<string, unknown>[];
  /** The protocol version the session negotiated. */
  protocolVersion?: string;
}

/**
 * The record of a session, to restore a copy of it here, and the principal it belongs to;
 * `forbidden` when it belongs to another principal than the request's (invariant: principal-bound).
 */
export type Restored = { record: RestoreRecord; principal: string | undefined } | { forbidden: true };
