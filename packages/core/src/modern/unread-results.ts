import { expectedBack } from '../session/routes.js';

/** How many unread results are remembered at most; past it the oldest is let go. */
const MAX_UNREAD = 10_000;

/**
 * Results of tasks that ended on this instance and that their clients have not read yet. With the
 * in-process task store a result goes when the process does, so a drain without a cluster waits
 * for them, as it waits for a 2025 answer written while its client was away:
 * until each is read, its client is overdue, or the drain's deadline.
 */
export class UnreadResults {
  /** By task id: until when its client is expected back (insertion order is the order tasks ended). */
  private readonly until = new Map<string, number>();

  /** A task ended here; its client is expected to read the result by `until` (ms since the epoch). */
  ended(taskId: string, until: number, now: number): void {
    this.forgetOverdue(now, true);
    if (this.until.size >= MAX_UNREAD) this.until.delete(this.until.keys().next().value as string);
    this.until.set(taskId, until);
  }

  /** The client has seen the task in its terminal state. */
  read(taskId: string): void {
    this.until.delete(taskId);
  }

  /** Until when the first result still expected to be read is expected; `undefined`: none is. */
  expectedUntil(now: number): number | undefined {
    this.forgetOverdue(now, false);
    let first: number | undefined;
    for (const until of this.until.values()) if (first === undefined || until < first) first = until;
    return first;
  }

  /** Drops results whose client is overdue: only the oldest ones (cheap, on every end), or all. */
  private forgetOverdue(now: number, oldestOnly: boolean): void {
    for (const [taskId, until] of this.until) {
      if (until >= now) {
        if (oldestOnly) return;
        continue;
      }
      this.until.delete(taskId);
    }
  }
}

/**
 * Until when the client of a task that ends now is expected back for its result: as a 2025 polling
 * client is ({@link expectedBack}), never past the task's own expiry.
 */
export function readBy(now: number, pollIntervalMs: number, expiresAt: number | undefined): number {
  const expected = expectedBack(now, pollIntervalMs);
  return expiresAt === undefined ? expected : Math.min(expected, expiresAt);
}
