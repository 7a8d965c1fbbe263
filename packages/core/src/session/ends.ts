import type { SessionDirectory } from '../ports/cluster.js';
import type { ResolvedOptions } from '../options.js';
import { asError } from '../util/errors.js';
import { OWED_END_RETRIES_MS, pauseBefore, withBriefRetries } from '../util/retry.js';

/** At most this many ends are owed at once; past it the oldest is given up. */
const MAX_OWED = 10_000;

/** A session its client deleted here, whose end the cluster has not taken yet. */
interface OwedEnd {
  principal: string | undefined;
  /** The try under way. */
  trying: Promise<boolean> | undefined;
  timer: ReturnType<typeof setTimeout> | undefined;
  tries: number;
  /** By then its records have expired by themselves: no more tries. */
  until: number;
}

/**
 * The cluster-wide end of the sessions their clients deleted here (invariant:
 * stored-before-success): the DELETE waits for the end (the owner record released, the record
 * deleted, the other copies told; the events dropped), tried
 * briefly. When Redis does not take it, the end is owed: tried again, backing off to once a second,
 * until Redis takes it or the session's record has expired by itself; meanwhile the session is
 * gone for every request that reaches this instance, and restored from its record by none.
 */
export class SessionEnds {
  private closed = false;
  private readonly owed = new Map<string, OwedEnd>();
  /** The cluster's session directory (see {@link join}); alone there is no end to owe. */
  private directory: SessionDirectory | undefined;

  constructor(private readonly options: ResolvedOptions) {}

  /** The handler has a cluster: ends are told to its directory. */
  join(directory: SessionDirectory): void {
    this.directory = directory;
  }

  /**
   * Whether the session's client deleted it here while the cluster could not be told yet: the
   * session is gone (404) whatever Redis still holds of it; `principal` is whose it was.
   */
  deletedHere(sessionId: string): { principal: string | undefined } | undefined {
    return this.owed.get(sessionId);
  }

  /**
   * After its client's DELETE ended the session here: `true` once the cluster took its end,
   * `false` if Redis did not take it within a few brief tries (it is owed then).
   */
  ended(sessionId: string): Promise<boolean> {
    const owed = this.owed.get(sessionId);
    return owed?.trying ?? Promise.resolve(owed === undefined);
  }

  /**
   * Tells the cluster the session ended for good, or again, for an end still owed (a DELETE sent
   * again; `waiting`: a client waits for it, so a failure is tried again at once, briefly).
   */
  endEverywhere(sessionId: string, principal: string | undefined, waiting = true): Promise<boolean> {
    let owed = this.owed.get(sessionId);
    if (owed?.trying) return owed.trying;
    if (!owed) {
      owed = { principal, trying: undefined, timer: undefined, tries: 0, until: Date.now() + this.options.sessionIdleTtlMs };
      this.owed.set(sessionId, owed);
      if (this.owed.size > MAX_OWED) this.giveUp(this.owed.keys().next().value!);
    }
    clearTimeout(owed.timer);
    const entry = owed;
    entry.trying = this.tellEnd(sessionId, waiting, entry.tries === 0).then((done) => {
      entry.trying = undefined;
      if (done || this.closed || Date.now() >= entry.until) this.giveUp(sessionId);
      else {
        const pauseMs = pauseBefore(OWED_END_RETRIES_MS, entry.tries);
        entry.timer = setTimeout(() => void this.endEverywhere(sessionId, principal, false), pauseMs);
        entry.timer.unref?.();
      }
      entry.tries++;
      return done;
    });
    return entry.trying;
  }

  /** The handler closes: no more tries here (the cluster tries the ends still owed once more as it closes). */
  close(): void {
    this.closed = true;
    for (const owed of this.owed.values()) clearTimeout(owed.timer);
  }

  private giveUp(sessionId: string): void {
    clearTimeout(this.owed.get(sessionId)?.timer);
    this.owed.delete(sessionId);
  }

  /**
   * One try at the cluster-wide end, with brief retries when a client waits for it; a failure is
   * reported the first time only, not at every later try. Idempotent: a release Redis applied
   * although its answer was lost is applied again harmlessly.
   */
  private async tellEnd(sessionId: string, waiting: boolean, report: boolean): Promise<boolean> {
    const { eventStore, onError } = this.options;
    const release = () => this.directory!.end(sessionId);
    let released: void | boolean;
    try {
      released = await (waiting ? withBriefRetries(release) : Promise.resolve().then(release));
    } catch (error) {
      if (report) onError(asError(error, 'cluster end failed (the DELETE is answered 503; tried again until Redis takes it)'));
      return false;
    }
    // Only while the session was still this instance's: a stale owner deletes nothing of the new one's.
    if (released === false) return true;
    // Without its records nothing serves the session: events that stay expire with their stream's TTL.
    const drop = () => eventStore.deleteSession(sessionId);
    await withBriefRetries(drop).catch((error: unknown) => onError(asError(error, 'event store deleteSession failed')));
    return true;
  }
}
