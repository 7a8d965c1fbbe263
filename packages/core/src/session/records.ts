import type { ResolvedOptions } from '../options.js';
import { asError, settle } from '../util/errors.js';
import { withBriefRetries } from '../util/retry.js';
import type { CopyRules } from './copy-rules.js';
import { restoreRecordOf } from './record.js';
import type { Session } from './session.js';

/** A record's TTL is refreshed at most once per this share of it: a request right after a save costs Redis nothing. */
const REFRESH_SLACK = 0.01;

/**
 * The sessions' records in the cluster (`SessionDirectory.saveRecord`): what restores a session on
 * any instance, this one included once it let the session go. Saved when the handshake is done and
 * whenever the client changes what a server keeps; kept alive at least `sessionIdleTtlMs` past each
 * session's last activity, by one batch per interval (a TTL is refreshed per interval, not per request).
 */
export class ClusterRecords {
  /** Sessions whose record is being saved: nothing would restore them yet. */
  private readonly saving = new Set<Session>();
  /** With `recordFirst`: the first save of the record of each session created here, until it settles. */
  private readonly firstSaves = new WeakMap<Session, Promise<void>>();
  /** When the records were last kept alive. */
  private keptAt = Date.now();
  /** Sessions active since then that this instance let go of: their records are kept alive with the others'. */
  private activeLetGo: string[] = [];
  /** When each session's record was last saved or kept alive (its TTL counts from then). */
  private readonly refreshed = new WeakMap<Session, number>();
  /** How often the records are kept alive: a quarter of their TTL, at most a minute. */
  private readonly keepEveryMs: number;
  private readonly slackMs: number;

  constructor(
    private readonly options: ResolvedOptions,
    private readonly rules: CopyRules,
  ) {
    const ttl = options.sessionIdleTtlMs;
    this.keepEveryMs = Math.min(60_000, Math.max(100, Math.floor(ttl / 4)));
    this.slackMs = ttl * REFRESH_SLACK;
  }

  /** Whether the session's record is being saved (it is not to be let go of until then). */
  isSaving(session: Session): boolean {
    return this.saving.has(session);
  }

  /**
   * Saves the session's record once its handshake is done and whenever the client changes it, for
   * other instances to restore from. With `recordFirst` (shared mode: the record is the session)
   * the handshake's answer waits for it, and goes out only once it is saved (see {@link recorded}).
   */
  track(session: Session): void {
    const directory = this.rules.directory;
    if (!directory.saveRecord) return;
    let first = this.rules.recordFirst && !session.restored ? this.awaitFirstSave(session) : undefined;
    session.server.record.changed = (change) => {
      const record = restoreRecordOf(session);
      if (!record || session.closed) return;
      const save = () => directory.saveRecord!(session.sessionId as string, record, this.options.sessionIdleTtlMs, change);
      const saving = withBriefRetries(save);
      this.saving.add(session);
      this.refreshed.set(session, Date.now());
      const saved = () => void this.saving.delete(session);
      saving.then(saved, saved);
      if (first) {
        // The handshake's: a failure reaches the answer (it is not delivered) and the engine (503).
        first(saving);
        first = undefined;
        return saving;
      }
      saving.catch((error: unknown) => this.options.onError(asError(error, 'cluster saveRecord failed')));
      return undefined;
    };
  }

  private awaitFirstSave(session: Session): (saving: Promise<void>) => void {
    let follow!: (saving: Promise<void>) => void;
    const saved = new Promise<void>((resolve) => (follow = resolve));
    // Nobody may wait for it (a handshake the server refused): no unhandled rejection then.
    saved.catch(() => {});
    this.firstSaves.set(session, saved);
    return follow;
  }

  /**
   * With `recordFirst`: resolves once the record of a session created here is saved (the handshake
   * is done), rejects if it could not be (after brief retries): the `initialize` answer is held
   * until then, and refused with 503 instead (invariant: stored-before-success). `undefined`
   * elsewhere: nothing to wait for.
   */
  recorded(session: Session): Promise<void> | undefined {
    return this.firstSaves.get(session);
  }

  /** This instance let go of its copy of the session; the record lives on, kept alive as long as the session would be. */
  copyLetGo(session: Session): void {
    // Active since the records were last kept alive: kept alive with the others' next time.
    if (session.lastActive >= this.keptAt && !this.fresh(session)) this.activeLetGo.push(session.sessionId as string);
  }

  /** Whether the session's record was saved or kept alive about when it was last active (within the slack). */
  private fresh(session: Session): boolean {
    return (this.refreshed.get(session) ?? -Infinity) >= session.lastActive - this.slackMs;
  }

  /**
   * A session's record lives `sessionIdleTtlMs` past its last activity, as the session would: every
   * {@link keepEveryMs}, the records of sessions active since (held here, or let go of since) or
   * connected are kept alive, in one batch.
   */
  keepAlive(held: Iterable<Session>, now: number): void {
    const directory = this.rules.directory;
    if (!directory.keepRecords || now - this.keptAt < this.keepEveryMs) return;
    const since = this.keptAt;
    this.keptAt = now;
    const active = this.activeLetGo;
    this.activeLetGo = [];
    for (const session of held) {
      if (session.openConnections === 0 && (session.lastActive < since || this.fresh(session))) continue;
      active.push(session.sessionId as string);
      this.refreshed.set(session, now);
    }
    if (active.length > 0)
      settle(() => directory.keepRecords!(active, this.options.sessionIdleTtlMs), this.options.onError, 'cluster keepRecords failed');
  }
}
