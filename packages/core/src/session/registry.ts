import { randomId } from '../events/ids.js';
import type { ResolvedOptions } from '../options.js';
import type { SseConnection } from '../streams/connection.js';
import { asError, settle } from '../util/errors.js';
import { Session } from './session.js';

/**
 * All sessions of one handler: creation under a cap, lookup, idle expiry, and the periodic work
 * (keep-alives, store eviction) done by one timer instead of one per stream.
 */
const NOTHING = (): void => {};

export class SessionRegistry {
  readonly sessions = new Map<string, Session>();
  /** Every open SSE connection, for keep-alives and shutdown. */
  readonly live = new Set<SseConnection>();
  private readonly timers: Array<ReturnType<typeof setInterval>> = [];

  constructor(private readonly options: ResolvedOptions) {
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

  get full(): boolean {
    return this.sessions.size >= this.options.maxSessions;
  }

  /** A new session bound to `principal` (the identity that created it; `undefined` without auth). */
  create(principal: string | undefined): Session {
    const session = new Session(randomId(), principal, this.options, this.live, this.forgetFn);
    this.sessions.set(session.sessionId as string, session);
    return session;
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
  }

  /** Sessions whose activity on other instances is being asked about. */
  private readonly asking = new Set<Session>();

  private expire(session: Session, now: number): void {
    const cluster = this.options.cluster;
    if (!cluster?.activeElsewhere) return session.terminate(undefined);
    // Its client may be connected to another instance (a resumed stream served there).
    if (this.asking.has(session)) return;
    this.asking.add(session);
    cluster.activeElsewhere(session.sessionId as string).then(
      (active) => {
        this.asking.delete(session);
        if (active) session.touch(now);
        // Still idle here too (no request or connection arrived while we asked)?
        else if (session.openConnections === 0 && session.lastActive < now - this.options.sessionIdleTtlMs) session.terminate(undefined);
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

  /** Ends every stream with a retry hint and closes every session. */
  close(retryMs: number): void {
    for (const t of this.timers) clearInterval(t);
    this.timers.length = 0;
    for (const session of [...this.sessions.values()]) session.terminate(retryMs);
    for (const conn of [...this.live]) conn.end(retryMs);
  }

  private readonly forgetFn = (session: Session): void => this.forget(session);

  /** A session ended: its events and its owner record go too. */
  private forget(session: Session): void {
    const id = session.sessionId as string;
    this.sessions.delete(id);
    const { eventStore, cluster, onError } = this.options;
    settle(() => eventStore.deleteSession(id), onError, 'event store deleteSession failed');
    if (cluster) settle(() => cluster.release(id), onError, 'cluster release failed');
  }

  private every(ms: number, fn: () => void): void {
    const t = setInterval(fn, ms);
    // Timers must not keep a process alive that has nothing else to do.
    t.unref?.();
    this.timers.push(t);
  }
}
