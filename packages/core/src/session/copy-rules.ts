import type { SessionDirectory } from '../ports/cluster.js';
import type { SessionEndReason } from '../telemetry/events.js';
import type { Session } from './session.js';

/**
 * Why an instance lets go of a copy for its own memory: a cap made room (`evict`), or the copy idled
 * past `hibernateAfterMs` (`hibernate`). Where its record is kept (the cluster's, or `KeptSessions`
 * alone) the session lives on, and its next request restores it. (A drain's hand-off, `handoff`,
 * is the other way a copy is let go of: for a peer.)
 */
export const LET_GO_FOR_MEMORY: ReadonlySet<SessionEndReason> = new Set(['evict', 'hibernate']);

/**
 * What the session layer asks of the cluster about the copies it holds: the session directory
 * both cluster modes share, and how the mode that runs treats a copy. The cluster layer
 * (`cluster/`) implements it for its mode and gives it to the registry (`SessionRegistry.join`),
 * so that nothing in the session layer asks which mode runs.
 */
export interface CopyRules {
  readonly directory: SessionDirectory;
  /** Whether a copy let go of here is restored from its record wherever its session's next request lands (this instance too). */
  readonly restoresAnywhere: boolean;
  /**
   * Whether a session exists for the other instances only once its record is saved: the answer
   * that completes its handshake waits for the first save (invariant: stored-before-success).
   */
  readonly recordFirst: boolean;
  /** Whether a copy closed here for `reason` ends the session everywhere; else only the copy goes, and the session lives on. */
  endsSession(reason: SessionEndReason): boolean;
  /** A copy was made here (created, or restored from its record), before it serves anything. */
  copyMade(session: Session): void;
}
