import type { CoreResponder, HeaderMap } from './http.js';
import type { JSONRPCMessage } from './mcp.js';

/**
 * The cluster port: how several instances of one MCP endpoint share sessions without sticky
 * sessions. A session lives (server, tool calls, transport) on the instance that answered its
 * `initialize`, its *owner*; any other instance that gets a request for it either forwards the
 * request to the owner or, for a `GET` + `Last-Event-ID`, serves the resume itself from a shared
 * {@link EventStore} (replay, then `subscribe` for the live tail).
 *
 * The engine only calls these methods; how owners are recorded and reached (Redis and an internal
 * URL in `@mcp-kit/redis`) is the implementation's business. Every method may reject: the engine
 * answers the request with 503 and reports the error through `onError`.
 */
export interface SessionCluster {
  /**
   * Records this instance as the owner of a new session, before the `initialize` response goes out
   * (so the client's next request finds it wherever it lands). `principal` is the identity that
   * created it (`undefined` without auth); other instances compare it like the owner does. A
   * rejection is tried again briefly, then answered `503` (no session id): it must be idempotent.
   */
  claim(sessionId: string, principal: string | undefined): Promise<void>;
  /**
   * The session ended here (DELETE, idle expiry, shutdown): forget its owner. `false` when another
   * instance owns it now (it took the session over while this one was away): the engine then
   * leaves the session's stored events alone, they are the new owner's.
   *
   * For the client's `DELETE` the engine waits for it before answering: `200` once it resolved,
   * `503` if it still rejects after a few brief tries. The engine then calls it again (backing off
   * to once a second) until it resolves, and meanwhile answers `404` for the session itself,
   * restoring it from no record. So it must be idempotent, and take up where a failed call stopped.
   * In a `shared` cluster it ends the session everywhere: what tells the other instances (the
   * `ended` {@link post}) must be done in one step with what they would find in durable state had
   * they missed it (the record gone), so that neither happens without the other.
   */
  release(sessionId: string): void | boolean | Promise<void | boolean>;
  /**
   * Optional: `listener` is called with each session another instance took over while this one
   * was away (a pause or a partition past its heartbeat window). The engine drops its copy at once
   * (as a hand-off: nothing stored is deleted), so one session is never served by two instances.
   */
  onLost?(listener: (sessionId: string) => void): void;
  /**
   * Optional, with `onLost`: nothing (at once) while this instance beats on time; after it missed
   * its heartbeat window (a pause, a partition), a promise that resolves once it checked again
   * which sessions are still its own (those a peer took over were reported to `onLost` by then),
   * or rejects if it cannot (the engine answers 503). The engine asks before a session held here
   * serves a request, so a stale copy never answers for a session a peer took over.
   */
  confirmOwnership?(): void | Promise<void>;
  /**
   * The owner of a session this instance does not hold; `undefined` when there is none (never
   * existed, deleted, expired, or its instance is gone). The engine then restores the session here
   * from its record (`takeOver`), or, without one, answers 404 so the client starts a new session.
   */
  lookupOwner(sessionId: string): Promise<SessionOwner | undefined>;
  /**
   * Serves the request on the owner and relays its answer, a JSON body or an SSE stream, through
   * `responder`, as it comes. Must add {@link FORWARDED_HEADER} so the owner never forwards it again.
   * Rejects only if nothing was relayed (the engine then answers 502, or restores the session here
   * once the owner is declared gone). When the owner may have received the request although no
   * answer came (it froze, or the network between the instances holds the bytes), the error has
   * `maybeReceived: true`: the engine then never serves a `POST` of it here (its tool would run
   * twice) and answers 502 at once. When the connection broke after the whole request went out
   * and before any answer, the error has `requestSent: true`: the owner may have read it and died
   * while it ran, or closed the connection unread as it stopped. With `jsonResponse` (an owner
   * answers only once its calls are done) the engine then treats a `POST` as `maybeReceived`,
   * unless the error also says `received: false`: the owner is known to acknowledge every
   * forwarded request before it runs anything (`CoreResponder.acknowledge`) and did not
   * acknowledge this one (`received: true` when it did). With SSE answers (an owner sends its
   * answer's head before its calls run) it serves it here once the owner is gone.
   */
  forward(owner: SessionOwner, request: ForwardedRequest, responder: CoreResponder): Promise<void>;
  /**
   * How often, in ms, a resume served here for another instance's session checks that the owner
   * is still there (when it is gone the stream ends with the retry hint, and the client's next
   * request restores the session where it lands, or gets 404 without `takeOver`) and calls
   * `touch`. Default `5_000`.
   */
  readonly ownerCheckMs?: number;
  /**
   * How long after an instance stops answering it counts as gone (`lookupOwner` stops naming it).
   * A request forwarded to an owner that does not answer waits this long for it to be declared
   * gone, then restores the session here (with `takeOver`). Default `0` (no waiting: 502).
   */
  readonly ownerTimeoutMs?: number;
  /**
   * Optional: a client of the session is connected here (a resumed stream served for its owner).
   * Called when such a resume starts and every `ownerCheckMs` while it lasts.
   */
  touch?(sessionId: string): void | Promise<void>;
  /**
   * Optional: whether another instance `touch`ed the session within the last few `ownerCheckMs`.
   * The owner asks before it expires a session that looks idle here, so a client following a
   * long tool call from another instance keeps its session alive.
   */
  activeElsewhere?(sessionId: string): Promise<boolean>;
  /**
   * Optional, for sessions that outlive their instance: keeps what another instance needs to
   * restore the session (its client's `initialize`, last `logging/setLevel`, principal, version)
   * with the owner record, for `ttlMs`. The owner calls it when the record changes (a rejection is
   * tried again briefly; it must be idempotent). In a `shared` cluster the record is the session:
   * the `initialize` answer, with the session id, is held until its first save, and refused with
   * `503` if that fails.
   *
   * `change` is the client's request that changed the record (`logging/setLevel`,
   * `resources/subscribe`, `resources/unsubscribe`; none for the handshake's first save). In a
   * `shared` cluster several copies may save at once: apply `change` to the record as stored,
   * atomically, rather than replace it with `record` (a copy's view, which may lack what another
   * copy changed a moment ago), so that no copy's change is lost.
   */
  saveRecord?(
    sessionId: string,
    record: RestoreRecord,
    ttlMs: number,
    change?: { method: string; params?: Record<string, unknown> },
  ): Promise<void>;
  /**
   * Optional, with `saveRecord`: takes over a session whose owner is gone (or handed it off), for
   * `principal`. Atomic, so of several instances racing for one session exactly one gets the
   * record; the others get the winner as `owner` (and forward to it). `forbidden` when the session
   * belongs to another principal; `undefined` when there is no such session.
   */
  takeOver?(sessionId: string, principal: string | undefined): Promise<TakeOver | undefined>;
  /** Optional, with `saveRecord`: the sessions are active; their records live another `ttlMs`. */
  keepRecords?(sessionIds: string[], ttlMs: number): Promise<void>;
  /**
   * Optional: counts a new session of `holder` (a principal, or `client:<key>` for a client without
   * auth, see `clientKey`) toward a quota of the deployment, before it is created: `0` once it
   * counts, or how many ms until the holder may open one again (the engine answers its
   * `initialize` 429 with that `Retry-After`). `windowMs` is the handler's `sessionIdleTtlMs`. An
   * instance's own caps only bound what it holds in memory (a session it lets go of lives on in the
   * cluster's records): this is what bounds one client's sessions in the deployment.
   */
  admitSession?(holder: string, sessionId: string, windowMs: number): Promise<number>;
  /** Optional, with `admitSession`: its client deleted the session; it no longer counts toward its holder's quota. */
  releaseAdmission?(holder: string, sessionId: string): Promise<void>;
  /** Optional, with `takeOver`: this instance lets go of a session (draining); its record stays for another to restore. */
  handOff?(sessionId: string): Promise<void>;
  /**
   * Optional: whether a {@link FORWARDED_HEADER} or {@link HANDED_OVER_HEADER} value was written by
   * an instance of this cluster (e.g. an HMAC over the request with a secret the instances share).
   * A request whose value fails is served as the client's own. Without it any value is trusted,
   * which is safe only where clients cannot send these headers to the instances.
   */
  verifyHop?(value: string, request: { method: string; sessionId: string | undefined }): boolean;
  /** Optional: the other live instances (a draining instance forwards requests to one of them). */
  peers?(): Promise<SessionOwner[]>;
  /** Optional: this instance's id, as other instances name it (task records carry their owner's). */
  readonly instanceId?: string;
  /**
   * Optional: whether an instance still beats. A task whose owning instance is gone is reported
   * `failed` instead of `working` forever.
   */
  instanceAlive?(instanceId: string): Promise<boolean>;
  /**
   * Optional: `true` for a cluster whose instances cannot reach each other (serverless): no
   * instance owns a session. Any instance serves any request, with a copy of the session restored
   * from its record (`takeOver` never names an owner, `lookupOwner` names none); a resume of a
   * stream written elsewhere follows the shared store; what must reach the copy that runs a call
   * (the client's answers to the server's requests, `notifications/cancelled`) goes through
   * {@link post}. A session ends everywhere only on its client's `DELETE`, or when its record expires.
   */
  readonly shared?: boolean;
  /**
   * Optional, with `shared`: delivers `message` to the instance `to` (`'*'`: every live instance,
   * this one excepted), whose {@link onMessage} listener gets it once. Resolves only once the
   * message is kept where `to` finds it even if it does not listen right now (its connection
   * reconnecting or half-open, the process frozen): a notification alone (pub/sub) is not enough,
   * it only wakes. Rejects if it could not be kept (the engine answers the POST that carried it
   * with 503). An instance that is gone for good gets nothing.
   */
  post?(to: string, message: ClusterMessage): Promise<void>;
  /** Optional, with `post`: `listener` gets each message posted to this instance or to all. */
  onMessage?(listener: (message: ClusterMessage) => void): void;
  /** Stops heartbeats and gives up ownership; called by `McpHandler.close()` after the sessions closed. */
  close?(): void | Promise<void>;
}

/**
 * What one instance tells another about a session in a `shared` cluster: `answer`, the client's
 * answer to a request the copy there sent (`message`); `cancel`, the client's
 * `notifications/cancelled` for a request running there (`message`); `record`, a request that
 * changes what every copy's server keeps (`logging/setLevel`, `resources/subscribe`,
 * `resources/unsubscribe`); `ended`, the client deleted the session; `lost-events`, a client came
 * back (through instance `from`) to a stream the event store can no longer replay after
 * `afterSeq` (Redis restarted empty, or evicted it): the copy that writes it answers its requests
 * in the store with an error, then tells `from` with `lost-events-answered`.
 */
export type ClusterMessage =
  | { kind: 'answer' | 'cancel'; sessionId: string; message: JSONRPCMessage }
  | { kind: 'record'; sessionId: string; request: { method: string; params?: Record<string, unknown> } }
  | { kind: 'ended'; sessionId: string }
  | { kind: 'lost-events'; sessionId: string; streamId: string; afterSeq: number; from: string }
  | { kind: 'lost-events-answered'; sessionId: string; streamId: string };

/** What restores a session on another instance (see {@link SessionCluster.saveRecord}). */
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

export type TakeOver = { record: RestoreRecord; principal: string | undefined } | { owner: SessionOwner } | { forbidden: true };

export interface SessionOwner {
  /** The owning instance's id. */
  instanceId: string;
  /** True when the record names this instance although the session is not here (a stale record). */
  self: boolean;
  /** The principal that created the session (see {@link SessionCluster.claim}). */
  principal: string | undefined;
  /** Where to reach the owner, for `forward` (e.g. its internal URL). Opaque to the engine. */
  address?: string;
}

/** A request to replay on the owner: the client's method, headers and body (already read here). */
export interface ForwardedRequest {
  method: string;
  /** The client's headers, lower-cased (hop-by-hop headers are the forwarder's to drop). */
  headers: HeaderMap;
  /** The JSON body of a POST; `undefined` for GET and DELETE. */
  body: string | undefined;
  /** The URL the client asked for, if the adapter knows it (its query string goes along). */
  url?: URL | undefined;
  /**
   * A draining instance hands the request over to a peer, which serves it as if it had come from
   * the client (it may restore the session, or forward it back to its owner): {@link HANDED_OVER_HEADER}
   * instead of {@link FORWARDED_HEADER}.
   */
  handOver?: boolean;
}

/**
 * Marks a request one instance forwarded to another. The receiver serves it locally (restoring
 * the session from its record if it just let it go) or answers 404: a forwarded request is never
 * forwarded again, so a stale owner record cannot loop. A draining receiver restores nothing: for
 * a session it no longer holds it answers with {@link MOVED_HEADER}.
 */
export const FORWARDED_HEADER = 'mcp-kit-forwarded-by';

/**
 * On the answer of a draining instance to a request forwarded to it as the session's owner, when
 * it has just let the session go: `SessionCluster.forward` must reject instead of relaying it, so
 * the sender waits for the owner record to stop naming that instance and restores the session.
 */
export const MOVED_HEADER = 'mcp-kit-moved';

/** Marks a request a draining instance handed over to a peer: served as the client's own, never handed back. */
export const HANDED_OVER_HEADER = 'mcp-kit-handed-over-by';
