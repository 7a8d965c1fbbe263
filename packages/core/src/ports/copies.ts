import type { Restored } from './record.js';
import type { JSONRPCMessage } from './mcp.js';

/**
 * Shared mode (see `SessionCluster`), where instances cannot reach each other (serverless): no
 * instance owns a session. Any instance serves any request with its own copy of the session,
 * restored from its record; a resume of a stream written elsewhere follows the shared store; what
 * must reach the copy that runs a call (the client's answers to the server's requests,
 * `notifications/cancelled`) goes through {@link post}. A session ends everywhere only on its
 * client's `DELETE`, or when its record expires.
 */
export interface SessionCopies {
  /**
   * The record of a session, for a copy of it here (nothing is taken from anybody); `undefined`
   * when there is no such session. From then on what is posted about the session reaches this
   * instance, until the directory's `letGo`.
   */
  restore(sessionId: string, principal: string | undefined): Promise<Restored | undefined>;
  /**
   * Delivers `message` to the instance `to` (`'*'`: every live instance, this one excepted), whose
   * {@link onMessage} listener gets it once. Resolves only once the message is kept where `to`
   * finds it even if it does not listen right now (its connection reconnecting or half-open, the
   * process frozen): a notification alone (pub/sub) is not enough, it only wakes (invariant:
   * wake-only). Rejects if it could not be kept (the engine answers the POST that carried it with
   * 503). An instance that is gone for good gets nothing.
   */
  post(to: string, message: ClusterMessage): Promise<void>;
  /** `listener` gets each message posted to this instance or to all. */
  onMessage(listener: (message: ClusterMessage) => void): void;
}

/**
 * What one copy tells another about a session in shared mode: `answer`, the client's answer to a
 * request the copy there sent (`message`); `cancel`, the client's `notifications/cancelled` for a
 * request running there (`message`); `record`, a request that changes what every copy's server
 * keeps (`logging/setLevel`, `resources/subscribe`, `resources/unsubscribe`); `ended`, the client
 * deleted the session; `lost-events`, a client came back (through instance `from`) to a stream the
 * event store can no longer replay after `afterSeq` (Redis restarted empty, or evicted it): the
 * copy that writes it answers its requests in the store with an error, then tells `from` with
 * `lost-events-answered`.
 */
export type ClusterMessage =
  | { kind: 'answer' | 'cancel'; sessionId: string; message: JSONRPCMessage }
  | { kind: 'record'; sessionId: string; request: { method: string; params?: Record<string, unknown> } }
  | { kind: 'ended'; sessionId: string }
  | { kind: 'lost-events'; sessionId: string; streamId: string; afterSeq: number; from: string }
  | { kind: 'lost-events-answered'; sessionId: string; streamId: string };
