import type { Rejection } from '../http/errors.js';
import type { SessionOwner } from '../ports/cluster.js';
import type { CoreRequest, CoreResponder } from '../ports/http.js';
import type { JSONRPCMessage } from '../ports/mcp.js';
import type { Session } from '../session/session.js';

/** Where the session a request names lives: here, on another instance of the cluster, or nowhere it may use. */
export type SessionResolution =
  | { kind: 'local'; session: Session }
  /** Another instance holds it: only the cluster layer serves the request (see {@link ClusterPort.serveElsewhere}). */
  | { kind: 'remote'; sessionId: string; owner: SessionOwner }
  /** Not here, and this instance is draining: it takes no session over; the request goes to a peer. */
  | { kind: 'moved' }
  | { kind: 'rejected'; rejection: Rejection };

export function rejected(rejection: Rejection): SessionResolution {
  return { kind: 'rejected', rejection };
}

/**
 * What the engine asks of the cluster, the layer above it (`cluster/`), when the handler has one
 * (`options.cluster`); without one, `EngineContext.cluster` is `undefined` and every verb serves
 * this instance's sessions only. The engine defines this port and never imports the cluster
 * layer: which cluster mode runs (forwarding to a session's owner, or a shared cluster where any
 * instance serves a copy) is the cluster layer's business, not the verbs'.
 */
export interface ClusterPort {
  /**
   * A session this instance does not hold: where it is now. Another live instance (`remote`), or
   * restored here from the record its gone owner left (`local`), or nowhere (`rejected`: 404).
   */
  find(req: CoreRequest, sessionId: string): Promise<SessionResolution>;
  /**
   * A session held here may have been taken over while this instance was away (a pause, a
   * partition): a check to wait for before it is served, or `undefined` when none is due.
   */
  confirmHeld(deleting: boolean): void | Promise<void>;
  /**
   * Serves a request for a session another instance holds, relaying its answer; when that instance
   * is gone, the session is restored here and returned for the engine to serve (else `undefined`:
   * the request was answered).
   */
  serveElsewhere(
    req: CoreRequest,
    res: CoreResponder,
    remote: { sessionId: string; owner: SessionOwner },
    body: string | undefined,
  ): Promise<Session | undefined>;
  /**
   * `GET` + `Last-Event-ID` for a stream this instance does not write (another instance's session,
   * or another copy of a session held here): served from the shared store. `false` when it is
   * this instance's to serve after all (the store cannot replay it: the writer answers). A promise
   * only when the stream is written elsewhere.
   */
  resumeElsewhere(req: CoreRequest, res: CoreResponder, found: SessionResolution, lastEventId: string): boolean | Promise<boolean>;
  /**
   * The messages of a POST for a session held here that belong to a call running elsewhere (a
   * client's answer, a cancel) go there: those to serve here, or a rejection when they could not be
   * passed on. A promise only when some had to be passed on.
   */
  routeMessages(session: Session, messages: JSONRPCMessage[]): JSONRPCMessage[] | Promise<JSONRPCMessage[] | Rejection>;
  /** Records this instance as a new session's owner before any instance can be asked for it; rejects if it could not. */
  claim(session: Session): Promise<void>;
  /**
   * Whether `holder` may open one more session in the deployment (`SessionCluster.admitSession`):
   * `undefined` once the new session `sessionId` counts, else the answer to its `initialize` (429
   * past the quota, 503 if the cluster could not be asked).
   */
  admit(holder: string | undefined, sessionId: string): Promise<Rejection | undefined>;
  /** The session `holder` opened was deleted: it no longer counts toward the quota (best effort). */
  dismiss(holder: string | undefined, sessionId: string): void;
  /** While draining: whether this request is still this instance's to serve (else {@link handOver}). */
  servedWhileDraining(req: CoreRequest): boolean;
  /** While draining: moves the request to a live peer (after handing off `session` if it is idle), or answers 503. */
  handOver(req: CoreRequest, res: CoreResponder, body: string | undefined, session?: Session): Promise<void>;
  /** Whether a drain hands this instance's sessions to other instances (else it waits for their calls, as alone). */
  readonly handsOff: boolean;
  /** A drain's end: the streams relayed from other instances end with the retry hint. */
  endRelayed(retryMs: number): void;
  /** Shutdown: relayed streams end; resolves once the requests being handed over are answered. */
  leave(retryMs: number): Promise<void>;
}
