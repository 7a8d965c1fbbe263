import type { SessionCopies } from './copies.js';
import type { SessionOwners } from './owners.js';
import type { RestoreRecord } from './record.js';

/**
 * The cluster port: how several instances of one MCP endpoint share sessions without sticky
 * sessions, in one of two modes. Both stand on the session {@link SessionDirectory} (each session's
 * record, its end, the instances that live); a mode adds what only it needs:
 *
 * - **forwarding** ({@link SessionOwners}): a session has one *owner*, the instance that answered
 *   its `initialize` or took it over; any other instance forwards the session's requests there, or
 *   serves a `GET` + `Last-Event-ID` itself from a shared `EventStore` (replay, then `subscribe`);
 * - **shared** ({@link SessionCopies}): no owner; any instance serves any request with its own
 *   *copy* of the session, restored from the record, and what must reach the copy that runs a call
 *   goes through the cluster (instances need not reach each other: serverless).
 *
 * Give `directory` and exactly one of `owners` and `copies`: which one is the mode, and the
 * engine picks its strategy once from it (`cluster/layer.ts`); nothing else in it asks which mode
 * runs. Every method may reject: the engine answers the request with 503 and reports the error
 * through `onError`.
 */
export interface SessionCluster {
  readonly directory: SessionDirectory;
  /** Forwarding: owners, and how to reach them. */
  readonly owners?: SessionOwners | undefined;
  /** Shared mode: copies restored from the record, and the bus between them. */
  readonly copies?: SessionCopies | undefined;
}

/**
 * What both cluster modes keep about a session where every instance reads it: its record (what
 * restores it anywhere), its end, whether a client follows it elsewhere; and which instances live.
 */
export interface SessionDirectory {
  /** This instance's id, as other instances name it (task records carry their owner's). */
  readonly instanceId?: string;
  /**
   * A new session opens here (its `initialize`), before the answer goes out, so that the client's
   * next request finds it wherever it lands. Forwarding records this instance as its owner.
   * `principal` is the identity that created it (`undefined` without auth); other instances compare
   * it as this one does. A rejection is tried again briefly, then answered `503` (no session id):
   * it must be idempotent.
   */
  open(sessionId: string, principal: string | undefined): Promise<void>;
  /**
   * The session ended (`DELETE`, idle expiry, its server closed): its record goes. `false` when
   * another instance owns it now (forwarding: it took the session over while this one was away):
   * the engine then leaves the session's stored events alone, they are the new owner's.
   *
   * For the client's `DELETE` the engine waits for it before answering (invariant:
   * stored-before-success): `200` once it resolved, `503` if it still rejects after a few brief
   * tries. The engine then calls it again (backing off to once a second) until it resolves, and
   * meanwhile answers `404` for the session itself, restoring it from no record. So it must be
   * idempotent, and take up where a failed call stopped. In shared mode it ends the session
   * everywhere: what tells the other copies (the `ended` message) must be done in one step with what
   * they would find in durable state had they missed it (the record gone), so that neither happens
   * without the other (invariant: wake-only).
   */
  end(sessionId: string): void | boolean | Promise<void | boolean>;
  /**
   * Optional: this instance let go of its copy (a cap, hibernation, a drain, a peer that took the
   * session over); the session lives on, and its record restores it where its next request lands
   * (invariant: deployment-owns-sessions). Forwarding: its owner record goes, the record stays.
   */
  letGo?(sessionId: string): Promise<void>;
  /**
   * Optional, for sessions that outlive their instance: keeps what another instance needs to
   * restore the session (its client's `initialize`, last `logging/setLevel`, subscriptions,
   * version), for `ttlMs`. Called when the record changes (a rejection is tried again briefly; it
   * must be idempotent). In shared mode the record is the session: the `initialize` answer, with
   * the session id, is held until its first save, and refused with `503` if that fails.
   *
   * `change` is the client's request that changed the record (`logging/setLevel`,
   * `resources/subscribe`, `resources/unsubscribe`; none for the handshake's first save). In shared
   * mode several copies may save at once: apply `change` to the record as stored, atomically,
   * rather than replace it with `record` (a copy's view, which may lack what another copy changed
   * a moment ago), so that no copy's change is lost.
   */
  saveRecord?(
    sessionId: string,
    record: RestoreRecord,
    ttlMs: number,
    change?: { method: string; params?: Record<string, unknown> },
  ): Promise<void>;
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
  /**
   * Optional: a client of the session is connected here (it follows a stream another instance
   * writes). Called when such a resume starts and every `writerCheckMs` while it lasts.
   */
  touch?(sessionId: string): void | Promise<void>;
  /**
   * Optional: whether another instance `touch`ed the session within the last few `writerCheckMs`.
   * Asked before a copy that looks idle here expires, so a client following a long tool call from
   * another instance keeps its session alive.
   */
  activeElsewhere?(sessionId: string): Promise<boolean>;
  /**
   * How often, in ms, a resume served here for a stream another instance writes checks that its
   * writer is still there (forwarding: the session's owner; shared: the stream's writer), and
   * calls `touch`. When the writer is gone the client hears so: forwarding ends the stream with
   * the retry hint (its next request restores the session where it lands), shared mode answers the
   * stream's calls with the lost-call error. Default `5_000`.
   */
  readonly writerCheckMs?: number;
  /**
   * Optional, with `onLetGo`: nothing (at once) while this instance beats on time; after it missed
   * its heartbeat window (a pause, a partition), a promise that resolves once it checked again
   * which copies held here are still its own to serve (those it must let go of were reported to
   * `onLetGo` by then), or rejects if it cannot (the engine answers 503). Asked before a copy held
   * here serves a request, so a stale copy never answers (invariant: one-owner).
   */
  confirmHeld?(): void | Promise<void>;
  /**
   * Optional: `listener` is called with each session whose copy this instance must let go of: a
   * peer took it over while this one was away (forwarding, a pause or a partition past its
   * heartbeat window), or its client deleted it meanwhile (shared mode). The engine drops its copy
   * at once; nothing stored is deleted.
   */
  onLetGo?(listener: (sessionId: string) => void): void;
  /**
   * Optional: whether an instance still beats. A task whose owning instance is gone is reported
   * `failed` instead of `working` forever; a stream whose writer is gone gets its calls answered.
   */
  instanceAlive?(instanceId: string): Promise<boolean>;
  /** Stops heartbeats and lets go of this instance's sessions; called by `McpHandler.close()` after the sessions closed. */
  close?(): void | Promise<void>;
}
