import type { RestoreRecord } from '../ports/record.js';

/** What restores a session an instance without a cluster let go of (see {@link KeptSessions}). */
export interface KeptSession {
  record: RestoreRecord;
  principal: string | undefined;
  holder: string | undefined;
  lastActive: number;
}

/**
 * Without a cluster, with hibernation on (its servers rebuild from a record): the sessions let go
 * of at `maxSessions`, each as the record that restores it (a few hundred bytes instead of a
 * session's few KiB), until its idle TTL. Alone there is no Redis to keep them, so the least loss
 * at the cap is to keep this much; past `max` of them the least recently used ends for good.
 */
export class KeptSessions {
  /** In the order they were let go of: the first is the least recently used. */
  private readonly kept = new Map<string, KeptSession>();

  constructor(private readonly max: number) {}

  get size(): number {
    return this.kept.size;
  }

  /** Keeps the session's record; returns the ids of the sessions that end for it (past `max`). */
  keep(sessionId: string, session: KeptSession): string[] {
    this.kept.set(sessionId, session);
    const ended: string[] = [];
    for (const id of this.kept.keys()) {
      if (this.kept.size <= this.max) break;
      this.kept.delete(id);
      ended.push(id);
    }
    return ended;
  }

  /** The session's record, taken out (it is restored). */
  take(sessionId: string): KeptSession | undefined {
    const session = this.kept.get(sessionId);
    this.kept.delete(sessionId);
    return session;
  }

  /** Removes and returns the ids of the sessions idle since before `cutoff`: they expired. */
  expire(cutoff: number): string[] {
    const expired: string[] = [];
    for (const [id, session] of this.kept) if (session.lastActive < cutoff) expired.push(id);
    for (const id of expired) this.kept.delete(id);
    return expired;
  }
}
