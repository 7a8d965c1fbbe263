import { randomId } from '../events/ids.js';
import type { ResolvedOptions } from '../options.js';
import type { SseConnection } from '../streams/connection.js';
import { asError, settle } from '../util/errors.js';
import type { RestoreRecord } from '../ports/record.js';
import { restoreFromRecord, restoreRecordOf } from './record.js';
import type { SessionEndReason } from '../telemetry/events.js';
import { LET_GO_FOR_MEMORY, type CopyRules } from './copy-rules.js';
import { SessionEnds } from './ends.js';
import { Session } from './session.js';
import { KeptSessions } from './kept.js';
import { ClusterRecords } from './records.js';

const NOTHING = (): void => {};

/** Alone, how many sessions let go of at the cap are kept as records, per session the cap holds. */
const KEPT_PER_HELD = 10;

/**
 * All sessions of one handler: creation under a cap, lookup, idle expiry, and the periodic work
 * (keep-alives, store eviction) done by one timer instead of one per stream.
 */
export class SessionRegistry {
  readonly sessions = new Map<string, Session>();
  /** Every open SSE connection, for keep-alives and shutdown. */
  readonly live = new Set<SseConnection>();
  /** Sessions their clients deleted here, while the cluster has not taken their end (see `SessionEnds`). */
  readonly ends: SessionEnds;
  /** Alone, with hibernation on: the sessions let go of at the cap, as their records. */
  private readonly kept: KeptSessions | undefined;
  /** In a cluster: the session directory, and how the cluster's mode treats a copy (see {@link join}). */
  private cluster: CopyRules | undefined;
  /** In a cluster that keeps them: the records that restore its sessions anywhere. */
  private records: ClusterRecords | undefined;
  private readonly timers: Array<ReturnType<typeof setInterval>> = [];
  /** Told each time a session may have settled, or closed (see {@link watchSettled}). */
  private settled: (() => void) | undefined;

  constructor(private readonly options: ResolvedOptions) {
    this.ends = new SessionEnds(options);
    if (!options.cluster && options.hibernateAfterMs !== undefined) this.kept = new KeptSessions(options.maxSessions * KEPT_PER_HELD);
    const { keepAliveMs, sessionIdleTtlMs, hibernateAfterMs } = options;
    if (keepAliveMs > 0) this.every(Math.max(50, Math.floor(keepAliveMs / 2)), () => this.keepAlive(keepAliveMs));
    let sweepMs = Math.min(60_000, Math.max(100, Math.floor(sessionIdleTtlMs / 4)));
    if (hibernateAfterMs !== undefined) sweepMs = Math.min(sweepMs, Math.max(100, Math.floor(hibernateAfterMs / 2)));
    this.every(sweepMs, () => this.sweep());
  }

  /** The handler has a cluster: its layer gives the rules of its mode, before any session is made. */
  join(rules: CopyRules): void {
    this.cluster = rules;
    this.records = new ClusterRecords(this.options, rules);
    this.ends.join(rules.directory);
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
   * least recently used idle session (of that holder, for its own cap) is let go of (see
   * {@link LET_GO_FOR_MEMORY}). `false` when the cap is reached and every session under it is busy.
   */
  makeRoom(holder: string | undefined): boolean {
    const perHolder = this.options.maxSessionsPerPrincipal;
    if (perHolder !== undefined && holder !== undefined) {
      const theirs = [...this.sessions.values()].filter((s) => s.holder === holder);
      if (theirs.length >= perHolder && !this.evictIdlest(theirs)) return false;
    }
    return this.sessions.size < this.options.maxSessions || this.evictIdlest(this.sessions.values());
  }

  /** Lets go of the least recently used session among `candidates` that nothing would miss. */
  private evictIdlest(candidates: Iterable<Session>): boolean {
    let idlest: Session | undefined;
    for (const session of candidates) {
      if (!this.releasable(session)) continue;
      if (!idlest || session.lastActive < idlest.lastActive) idlest = session;
    }
    idlest?.terminate(undefined, 'evict');
    return idlest !== undefined;
  }

  /** Whether the session can be let go of: nothing here would miss it, and its record is not being saved. */
  private releasable(session: Session): boolean {
    return session.evictable && !this.records?.isSaving(session);
  }

  /**
   * A new session bound to `principal` (the identity that created it; `undefined` without auth);
   * `holder` is whom the per-principal cap counts it for.
   */
  create(principal: string | undefined, holder?: string, sessionId: string = randomId()): Session {
    const session = new Session(sessionId, principal, this.options, this.live, this.forgetFn);
    session.holder = holder;
    return this.add(session);
  }

  /**
   * A copy of a session restored here from its record: one another instance held, or this one let
   * go of. It counts toward the caps like a new one: room is made for it if there is any to make.
   */
  restore(sessionId: string, principal: string | undefined, record: RestoreRecord, holder: string | undefined = principal): Session {
    this.makeRoom(holder);
    const session = new Session(sessionId, principal, this.options, this.live, this.forgetFn);
    restoreFromRecord(session, record);
    session.holder = holder;
    return this.add(session);
  }

  /** Alone: a session this instance let go of at the cap, restored from the record it kept; `undefined` if none is kept. */
  restoreKept(sessionId: string): Session | undefined {
    const kept = this.kept?.take(sessionId);
    return kept && this.restore(sessionId, kept.principal, kept.record, kept.holder);
  }

  private add(session: Session): Session {
    this.sessions.set(session.sessionId as string, session);
    session.onSettled = this.settled;
    const { telemetry } = this.options;
    if (telemetry.on) telemetry.sessionEvent('session.open', session.sessionId as string, { restored: session.restored });
    this.cluster?.copyMade(session);
    this.records?.track(session);
    return session;
  }

  /** See {@link ClusterRecords.recorded}. */
  recorded(session: Session): Promise<void> | undefined {
    return this.records?.recorded(session);
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
   * hibernates those idle past `hibernateAfterMs` (an open GET stream does not count there). A
   * session nothing here would miss (see `Session.evictable`) whose record the cluster keeps is let
   * go of whole: an instance holds nothing for a session it is not serving.
   */
  sweep(now: number = Date.now()): void {
    const cutoff = now - this.options.sessionIdleTtlMs;
    const { hibernateAfterMs } = this.options;
    const sleepBefore = hibernateAfterMs === undefined ? undefined : now - hibernateAfterMs;
    const letGoWhole = this.cluster?.restoresAnywhere ?? false;
    for (const session of this.sessions.values()) {
      if (session.openConnections === 0 && session.lastActive < cutoff) this.expire(session, now);
      else if (sleepBefore === undefined || session.lastActive > sleepBefore) continue;
      else if (letGoWhole && this.releasable(session)) this.letGoIdle(session);
      else if (!session.hibernated) session.hibernate();
    }
    if (this.kept) for (const id of this.kept.expire(cutoff)) this.endKept(id);
    this.options.eventStore.sweep?.(now);
    this.options.taskStore.sweep?.(now);
    this.records?.keepAlive(this.sessions.values(), now);
  }

  /** Sessions whose activity on other instances is being asked about. */
  private readonly asking = new Set<Session>();

  private expire(session: Session, now: number): void {
    const directory = this.cluster?.directory;
    if (!directory?.activeElsewhere) return session.terminate(undefined, 'expire');
    // Its client may be connected to another instance (a resumed stream served there).
    if (this.asking.has(session)) return;
    this.asking.add(session);
    directory.activeElsewhere(session.sessionId as string).then(
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
   * Lets go of the copy held here for another instance to restore (a drain hands it off; a peer
   * took it over): it ends here, with the retry hint on its connections, and the directory hears
   * so (forwarding: this instance's owner record goes); its stored events and record stay.
   * Resolves once no instance will be sent here for it.
   */
  async letGo(session: Session, retryMs: number): Promise<void> {
    session.terminate(retryMs, 'handoff');
    try {
      await this.cluster?.directory.letGo?.(session.sessionId as string);
    } catch (error) {
      this.options.onError(asError(error, 'cluster letGo failed'));
    }
  }

  /** `listener` is told, from now on, each time a session may have become idle, or closed (the drain waits for that). */
  watchSettled(listener: () => void): void {
    this.settled = listener;
    for (const session of this.sessions.values()) session.onSettled = listener;
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

  /** Hibernation, for a session whose record the cluster keeps: its server and the rest of it go. */
  private letGoIdle(session: Session): void {
    const { telemetry } = this.options;
    if (telemetry.on) telemetry.sessionEvent('session.hibernate', session.sessionId as string, {});
    session.terminate(undefined, 'hibernate');
  }

  /** Alone: a session kept as its record ends for good (its idle TTL, or more were let go of than are kept). */
  private endKept(sessionId: string): void {
    const { eventStore, onError, telemetry } = this.options;
    if (telemetry.on) telemetry.sessionEvent('session.close', sessionId, { reason: 'expire' });
    settle(() => eventStore.deleteSession(sessionId), onError, 'event store deleteSession failed');
  }

  private readonly forgetFn = (session: Session, reason: SessionEndReason): void => this.forget(session, reason);

  /**
   * A copy closed here. The session ends with it (its events and record go) unless it lives on in
   * the cluster: let go of for a peer (see {@link letGo}), or a copy the cluster's mode does not
   * take for the session (invariant: deployment-owns-sessions: only its idle TTL and its client's
   * DELETE end a session).
   */
  private forget(session: Session, reason: SessionEndReason): void {
    const id = session.sessionId as string;
    if (id === undefined) return;
    this.sessions.delete(id);
    this.settled?.();
    const { eventStore, onError, telemetry } = this.options;
    const cluster = this.cluster;
    // Nothing more is written here to its streams, whether it ends or lives on elsewhere (invariant: one-writer).
    eventStore.doneWriting?.(id);
    if (telemetry.on) telemetry.sessionEvent('session.close', id, { reason });
    // Let go of for a peer: its events and record stay for the next instance (see letGo).
    if (reason === 'handoff') return;
    // Only the copy goes: its record restores the session on whichever instance its next request
    // reaches, this one included; the directory hears that this instance holds it no more.
    if (cluster && !cluster.endsSession(reason)) {
      if (LET_GO_FOR_MEMORY.has(reason)) this.records?.copyLetGo(session);
      return settle(() => cluster.directory.letGo?.(id), onError, 'cluster letGo failed');
    }
    if (this.kept && LET_GO_FOR_MEMORY.has(reason) && this.keep(session)) return;
    if (!cluster) return settle(() => eventStore.deleteSession(id), onError, 'event store deleteSession failed');
    // Its client's DELETE (or its server closed): it ends everywhere, and the DELETE waits for that.
    if (reason === 'delete') return void this.ends.endEverywhere(id, session.principal);
    // Only while the session is still this instance's: a stale owner deletes nothing of the new one's.
    settle(
      async () => {
        if ((await cluster.directory.end(id)) !== false) await eventStore.deleteSession(id);
      },
      onError,
      'cluster end or event store deleteSession failed',
    );
  }

  /** Alone: keeps what restores a session let go of at the cap; `false` for one that never completed its handshake. */
  private keep(session: Session): boolean {
    const record = restoreRecordOf(session);
    if (!record) return false;
    const { principal, holder, lastActive } = session;
    for (const id of this.kept!.keep(session.sessionId as string, { record, principal, holder, lastActive })) this.endKept(id);
    return true;
  }

  private every(ms: number, fn: () => void): void {
    const t = setInterval(fn, ms);
    // Timers must not keep a process alive that has nothing else to do.
    t.unref?.();
    this.timers.push(t);
  }
}
