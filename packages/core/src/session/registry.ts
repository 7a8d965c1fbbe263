import { randomId } from '../events/ids.js';
import type { ResolvedOptions } from '../options.js';
import type { SseConnection } from '../streams/connection.js';
import { asError, settle } from '../util/errors.js';
import { brieflyRetried } from '../util/retry.js';
import type { RestoreRecord } from '../ports/cluster.js';
import { adoptRecord, restoreRecordOf } from './record.js';
import type { SessionEndReason } from '../telemetry/events.js';
import { SessionEnds } from './ends.js';
import { Session } from './session.js';
import { AnswerTags } from './answer-tags.js';

/**
 * All sessions of one handler: creation under a cap, lookup, idle expiry, and the periodic work
 * (keep-alives, store eviction) done by one timer instead of one per stream.
 */
const NOTHING = (): void => {};

export class SessionRegistry {
  readonly sessions = new Map<string, Session>();
  /** Every open SSE connection, for keep-alives and shutdown. */
  readonly live = new Set<SseConnection>();
  /** Sessions their clients deleted here, while the cluster has not taken their end (see `SessionEnds`). */
  readonly ends: SessionEnds;
  private readonly timers: Array<ReturnType<typeof setInterval>> = [];

  constructor(private readonly options: ResolvedOptions) {
    this.ends = new SessionEnds(options);
    const { keepAliveMs, sessionIdleTtlMs, hibernateAfterMs } = options;
    if (keepAliveMs > 0) this.every(Math.max(50, Math.floor(keepAliveMs / 2)), () => this.keepAlive(keepAliveMs));
    let sweepMs = Math.min(60_000, Math.max(100, Math.floor(sessionIdleTtlMs / 4)));
    if (hibernateAfterMs !== undefined) sweepMs = Math.min(sweepMs, Math.max(100, Math.floor(hibernateAfterMs / 2)));
    this.every(sweepMs, () => this.sweep());
  }

  get size(): number {
    return this.sessions.size;
  }

  /** Sessions whose server is let go (see `hibernateAfterMs`). */
  get hibernatedCount(): number {
    let n = 0;
    for (const session of this.sessions.values()) if (session.hibernated) n++;
    return n;
  }

  /**
   * Makes room for one more session of `holder` (a principal, or a client address): at a cap, the
   * least recently used idle session (of that holder, for its own cap) is let go. `false` when the
   * cap is reached and every session under it is busy.
   */
  makeRoom(holder: string | undefined): boolean {
    const perHolder = this.options.maxSessionsPerPrincipal;
    if (perHolder !== undefined && holder !== undefined) {
      const theirs = [...this.sessions.values()].filter((s) => s.holder === holder);
      if (theirs.length >= perHolder && !this.evictIdlest(theirs)) return false;
    }
    return this.sessions.size < this.options.maxSessions || this.evictIdlest(this.sessions.values());
  }

  /** Ends the least recently used session among `candidates` that nothing would miss. */
  private evictIdlest(candidates: Iterable<Session>): boolean {
    let idlest: Session | undefined;
    for (const session of candidates) {
      if (!session.evictable) continue;
      if (!idlest || session.lastActive < idlest.lastActive) idlest = session;
    }
    idlest?.terminate(undefined, 'evict');
    return idlest !== undefined;
  }

  /**
   * A new session bound to `principal` (the identity that created it; `undefined` without auth);
   * `holder` is whom the per-principal cap counts it for.
   */
  create(principal: string | undefined, holder?: string): Session {
    const session = new Session(randomId(), principal, this.options, this.live, this.forgetFn);
    session.holder = holder;
    return this.add(session);
  }

  /** A session another instance held, restored here from its record (see `SessionCluster.takeOver`). */
  adopt(sessionId: string, principal: string | undefined, record: RestoreRecord): Session {
    const session = new Session(sessionId, principal, this.options, this.live, this.forgetFn);
    adoptRecord(session, record);
    return this.add(session);
  }

  private add(session: Session): Session {
    this.sessions.set(session.sessionId as string, session);
    const { telemetry } = this.options;
    if (telemetry.on) telemetry.sessionEvent('session.open', session.sessionId as string, { restored: session.adopted });
    const cluster = this.options.cluster;
    // Shared: the server's requests carry this instance's id, for the client's answer to find it.
    if (cluster?.shared) session.server.answerTags = new AnswerTags(`${cluster.instanceId ?? ''}~${randomId().slice(0, 8)}~`);
    if (cluster?.saveRecord) {
      // Saved once the handshake is done and whenever the log level changes, for other instances to
      // restore from. In a shared cluster the record is the session: the handshake's answer waits
      // for it, and goes out only once it is saved (see `recorded`).
      let first = cluster.shared && !session.adopted ? this.awaitFirstSave(session) : undefined;
      session.server.record.changed = (change) => {
        const record = restoreRecordOf(session);
        if (!record || session.closed) return;
        const save = () => cluster.saveRecord!(session.sessionId as string, record, this.options.sessionIdleTtlMs, change);
        const saving = Promise.resolve()
          .then(save)
          .catch(() => brieflyRetried(save));
        if (first) {
          // The handshake's: a failure reaches the answer (it is not delivered) and the engine (503).
          first(saving);
          first = undefined;
          return saving;
        }
        const reported = saving.catch((error: unknown) => this.options.onError(asError(error, 'cluster saveRecord failed')));
        return cluster.shared ? reported : undefined;
      };
    }
    return session;
  }

  /** Shared cluster: the first save of the record of each session created here, until it settles. */
  private readonly firstSaves = new WeakMap<Session, Promise<void>>();

  private awaitFirstSave(session: Session): (saving: Promise<void>) => void {
    let follow!: (saving: Promise<void>) => void;
    const saved = new Promise<void>((resolve) => (follow = resolve));
    // Nobody may wait for it (a handshake the server refused): no unhandled rejection then.
    saved.catch(() => {});
    this.firstSaves.set(session, saved);
    return follow;
  }

  /**
   * Shared cluster: resolves once the record of a session created here is saved (the handshake is
   * done), rejects if it could not be (after brief retries): the `initialize` answer is held until
   * then, and refused with 503 instead (issue 27, item 4). `undefined` elsewhere: nothing to wait for.
   */
  recorded(session: Session): Promise<void> | undefined {
    return this.firstSaves.get(session);
  }

  /** A throwaway session for one stateless request. */
  ephemeral(): Session {
    return new Session(undefined, undefined, this.options, this.live, NOTHING);
  }

  get(sessionId: string): Session | undefined {
    return this.sessions.get(sessionId);
  }

  /**
   * Closes sessions idle past the TTL (no request and no open connection for that long) and
   * hibernates those idle past `hibernateAfterMs` (an open GET stream does not count there).
   */
  sweep(now: number = Date.now()): void {
    const cutoff = now - this.options.sessionIdleTtlMs;
    const { hibernateAfterMs } = this.options;
    const sleepBefore = hibernateAfterMs === undefined ? undefined : now - hibernateAfterMs;
    for (const session of this.sessions.values()) {
      if (session.openConnections === 0 && session.lastActive < cutoff) this.expire(session, now);
      else if (sleepBefore !== undefined && session.lastActive <= sleepBefore && !session.hibernated) session.hibernate();
    }
    this.options.eventStore.sweep?.(now);
    this.options.taskStore.sweep?.(now);
    this.keepRecords(now);
  }

  /** When the restore records were last kept alive. */
  private recordsKeptAt = Date.now();

  /**
   * A session's restore record lives `sessionIdleTtlMs` past its last activity, as the session
   * would: the records of sessions active since the last sweep are kept alive, in one batch.
   */
  private keepRecords(now: number): void {
    const cluster = this.options.cluster;
    if (!cluster?.keepRecords) return;
    const since = this.recordsKeptAt;
    this.recordsKeptAt = now;
    const active: string[] = [];
    for (const session of this.sessions.values())
      if (session.lastActive >= since || session.openConnections > 0) active.push(session.sessionId as string);
    if (active.length > 0)
      settle(() => cluster.keepRecords!(active, this.options.sessionIdleTtlMs), this.options.onError, 'cluster keepRecords failed');
  }

  /** Sessions whose activity on other instances is being asked about. */
  private readonly asking = new Set<Session>();

  private expire(session: Session, now: number): void {
    const cluster = this.options.cluster;
    if (!cluster?.activeElsewhere) return session.terminate(undefined, 'expire');
    // Its client may be connected to another instance (a resumed stream served there).
    if (this.asking.has(session)) return;
    this.asking.add(session);
    cluster.activeElsewhere(session.sessionId as string).then(
      (active) => {
        this.asking.delete(session);
        if (active) session.touch(now);
        // Still idle here too (no request or connection arrived while we asked)?
        else if (session.openConnections === 0 && session.lastActive < now - this.options.sessionIdleTtlMs)
          session.terminate(undefined, 'expire');
      },
      (error: unknown) => {
        // Unknown is not idle: ask again at the next sweep (maxSessions still bounds what is kept).
        this.asking.delete(session);
        this.options.onError(asError(error, 'cluster activeElsewhere failed'));
      },
    );
  }

  keepAlive(idleMs: number, now: number = Date.now()): void {
    for (const conn of this.live) conn.keepAlive(now, idleMs);
  }

  /**
   * Lets another instance take the session over (draining): it ends here, with the retry hint on
   * its connections, and the cluster drops this instance's ownership; its stored events and
   * restore record stay. Resolves once no instance will be sent here for it.
   */
  async handOff(session: Session, retryMs: number): Promise<void> {
    session.terminate(retryMs, 'handoff');
    try {
      await this.options.cluster?.handOff?.(session.sessionId as string);
    } catch (error) {
      this.options.onError(asError(error, 'cluster handOff failed'));
    }
  }

  /** Sessions with no call running nor a question awaiting the client: they can move to another instance. */
  idleSessions(): Session[] {
    const idle: Session[] = [];
    for (const session of this.sessions.values()) if (session.idle) idle.push(session);
    return idle;
  }

  /** Ends every stream with a retry hint and closes every session. */
  close(retryMs: number): void {
    for (const t of this.timers) clearInterval(t);
    this.timers.length = 0;
    this.ends.close();
    for (const session of [...this.sessions.values()]) session.terminate(retryMs, 'shutdown');
    for (const conn of [...this.live]) conn.end(retryMs);
  }

  private readonly forgetFn = (session: Session, reason: SessionEndReason): void => this.forget(session, reason);

  /**
   * A session closed here. It ends (its events and owner record go) unless it lives on in the
   * cluster: handed off, a copy in a shared cluster, or let go of at a cap while the cluster keeps
   * its record (the session belongs to the deployment, not to this instance: only its idle TTL and
   * its client's DELETE end it).
   */
  private forget(session: Session, reason: SessionEndReason): void {
    const id = session.sessionId as string;
    if (id === undefined) return;
    this.sessions.delete(id);
    const { eventStore, cluster, onError, telemetry } = this.options;
    // Nothing more is written here to its streams, whether it ends or lives on elsewhere (issue 27, item 8).
    eventStore.letGo?.(id);
    if (telemetry.on) telemetry.sessionEvent('session.close', id, { reason });
    // Handed off: its events and record stay for the next instance (see handOff).
    if (reason === 'handoff') return;
    // In a shared cluster this copy is one of many: only its client's DELETE ends the session everywhere.
    if (cluster?.shared && reason !== 'delete') return settle(() => cluster.handOff?.(id), onError, 'cluster handOff failed');
    // Let go of at a cap: its record restores it on whichever instance its next request reaches,
    // this one included; the owner record goes, so that no peer forwards it here.
    if (reason === 'evict' && cluster?.saveRecord && cluster.takeOver)
      return settle(() => cluster.handOff?.(id), onError, 'cluster handOff failed');
    if (!cluster) return settle(() => eventStore.deleteSession(id), onError, 'event store deleteSession failed');
    // Its client's DELETE (or its server closed): it ends everywhere, and the DELETE waits for that.
    if (reason === 'delete') return void this.ends.endEverywhere(id, session.principal);
    // Only while the session is still this instance's: a stale owner deletes nothing of the new one's.
    settle(
      async () => {
        if ((await cluster.release(id)) !== false) await eventStore.deleteSession(id);
      },
      onError,
      'cluster release or event store deleteSession failed',
    );
  }

  private every(ms: number, fn: () => void): void {
    const t = setInterval(fn, ms);
    // Timers must not keep a process alive that has nothing else to do.
    t.unref?.();
    this.timers.push(t);
  }
}
