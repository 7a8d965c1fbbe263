import type { Rejection } from '../http/errors.js';
import type { CoreRequest, CoreResponder } from '../ports/http.js';
import type { JSONRPCMessage } from '../ports/mcp.js';
import type { Arrival } from '../session/arrivals.js';
import type { Session } from '../session/session.js';

/** What a verb tells the cluster about its request for a session. */
export interface SessionRequest {
  /** A POST's body as it came: relayed when the request is served on another instance. */
  body?: () => string;
  /** A DELETE: the session ends wherever it is found, a copy held here without moving it first. */
  deleting?: boolean;
  /** A resume (`GET` + `Last-Event-ID`): a stream written elsewhere is followed from the shared store. */
  lastEventId?: string;
  /** A check once the session is found, before it is served anywhere (a resume's scopes). */
  check?: () => Rejection | undefined;
}

/**
 * What the engine asks of the cluster, the layer above it (`cluster/`), when the handler has one
 * (`options.cluster`); without one, `EngineContext.cluster` is `undefined` and every verb serves
 * this instance's sessions only. The engine defines this port and never imports the cluster
 * layer: which cluster mode runs (forwarding to a session's owner, or shared, where any instance
 * serves a copy) is the cluster layer's business, not the verbs'.
 */
export interface ClusterPort {
  /**
   * Serves a request for a session, wherever the session is: `here(session)` when it is held here
   * or restored here from its record; otherwise the cluster serves it itself (forwarded to the
   * session's owner, handed to a peer while draining, a stream another instance writes followed
   * from the shared store) or refuses it (404, 503). `arrival` counts the request for the drain
   * while it is on its way here (not while another instance serves it).
   */
  serve(
    req: CoreRequest,
    res: CoreResponder,
    request: SessionRequest,
    arrival: Arrival,
    here: (session: Session) => Promise<void>,
  ): Promise<void>;
  /**
   * The messages of a POST for a session held here that belong to a call running on another copy
   * (a client's answer, a cancel) go there: those to serve here, or a rejection when they could
   * not be passed on. A promise only when some had to be passed on.
   */
  routeMessages(session: Session, messages: JSONRPCMessage[]): JSONRPCMessage[] | Promise<JSONRPCMessage[] | Rejection>;
  /** A new session opens here: the directory knows it before any instance can be asked for it; rejects if it could not. */
  open(session: Session): Promise<void>;
  /**
   * Whether `holder` may open one more session in the deployment (`SessionDirectory.admitSession`):
   * `undefined` once the new session `sessionId` counts, else the answer to its `initialize` (429
   * past the quota, 503 if the cluster could not be asked).
   */
  admit(holder: string | undefined, sessionId: string): Promise<Rejection | undefined>;
  /** The session `holder` opened was deleted: it no longer counts toward the quota (best effort). */
  dismiss(holder: string | undefined, sessionId: string): void;
  /**
   * While draining, new work (a new session, a 2026 request): `true` once it went to a live peer
   * (or was refused for want of one), `false` when it is still this instance's to serve.
   */
  handOver(req: CoreRequest, res: CoreResponder, body: () => string): Promise<boolean>;
  /** Whether a drain hands this instance's sessions off to other instances (else it waits for their calls, as alone). */
  readonly handsOff: boolean;
  /** A drain's end: the streams relayed from other instances end with the retry hint. */
  endRelayed(retryMs: number): void;
  /** Shutdown: relayed streams end; resolves once the requests being handed over are answered. */
  leave(retryMs: number): Promise<void>;
}
