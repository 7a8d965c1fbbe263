/**
 * Every retry schedule of mcp-kit, named, with why it is as it is, and the helpers that follow them.
 * A schedule lists the pauses (ms) before each new try; past its end its last pause repeats.
 */

/**
 * A store operation a waiting request depends on (a replay, an owner lookup, a stream's
 * registration, a record's save): tried again at once and twice more within ~150 ms before the
 * request is answered 503. An SDK v1 client gives a failed resume only two more tries before it
 * stops listening and waits for its request timeout, so a one-command blip must not reach it
 * (invariant: come-back-later).
 */
export const BRIEF_RETRIES_MS: readonly number[] = [0, 50, 100];

/**
 * A write that waits out an outage (an event, a task's update, a poll's read): backing off to once
 * a second, for as long as the caller says. A Redis restart or a failover outlasts any budget of a
 * few seconds, and what is not stored cannot be resumed (invariant: stored-before-sent).
 */
export const OUTAGE_RETRIES_MS: readonly number[] = [0, 50, 100, 200, 400, 800, 1_000];

/**
 * The cluster's check of which sessions are still this instance's, after one failed: a slow or
 * resetting network to Redis fails one (each is bounded by the cluster's check timeout), and a 503
 * ends an SDK client's call, so the request waits through three more (about 10 s at most) first.
 */
export const OWNERSHIP_RECHECKS_MS: readonly number[] = [100, 500, 1_000];

/**
 * A DELETE's cluster-wide end that Redis did not take while the DELETE waited (it was answered
 * 503): backing off to once a second, for as long as the session's record could still restore it
 * somewhere (invariant: stored-before-success).
 */
export const OWED_END_RETRIES_MS: readonly number[] = [250, 500, 1_000];

/**
 * The `retry:` of a resume sent back to come later, by how many times it was sent back already:
 * soon after a blip, no more often than every 5 s through a long outage (invariant:
 * come-back-later).
 */
export const COME_BACK_LATER_MS: readonly number[] = [500, 1_000, 2_000, 4_000, 5_000];

/**
 * ioredis' reconnects while Redis is unreachable: 100 ms more at each, to every 2 s, so a restart
 * is found within 2 s of its end without a reconnect storm meanwhile.
 */
export const REDIS_RECONNECT_MS: readonly number[] = Array.from({ length: 20 }, (_, i) => 100 * (i + 1));

/** The pause before try `i` (from 0) of `schedule`: its last pause once `i` is past its end. */
export function pauseBefore(schedule: readonly number[], i: number): number {
  return schedule[Math.min(i, schedule.length - 1)] as number;
}

function pause(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** `op()` as a promise: a synchronous throw becomes a rejection. */
function attempt<T>(op: () => T | Promise<T>): Promise<T> {
  try {
    return Promise.resolve(op());
  } catch (error) {
    return Promise.reject(error);
  }
}

/** The error a write ended with, or `undefined` once it succeeded. */
export function failureOf(write: unknown): Promise<unknown> {
  return Promise.resolve(write).then(
    () => undefined,
    (error: unknown) => error ?? new Error('store write failed'),
  );
}

/**
 * Runs `op` and, if it fails, tries it again on {@link BRIEF_RETRIES_MS}: its result, or its last
 * error once the tries run out. `first` is the first try's outcome when the caller made it already
 * (a synchronous store's answer stays synchronous there). Idempotent operations only.
 */
export async function withBriefRetries<T>(op: () => T | Promise<T>, first: T | Promise<T> = attempt(op)): Promise<T> {
  try {
    return await first;
  } catch (error) {
    let last = error;
    for (const pauseMs of BRIEF_RETRIES_MS) {
      await pause(pauseMs);
      try {
        return await attempt(op);
      } catch (again) {
        last = again;
      }
    }
    throw last;
  }
}

/** Runs `op` and, if it fails, {@link retriedWhile}: `undefined` once it succeeded, else its last error. */
export async function triedWhile(op: () => unknown, goOn: (last: unknown) => boolean): Promise<unknown> {
  const error = await failureOf(attempt(op));
  return error === undefined ? undefined : retriedWhile(op, error, goOn);
}

/**
 * Tries a failed write again on {@link OUTAGE_RETRIES_MS} for as long as `goOn(lastError)` says
 * (an outage lasts as long as it lasts: no budget of ours is longer than every real one):
 * `undefined` once it succeeded, or its last error once `goOn` said stop. Idempotent writes only.
 */
export async function retriedWhile(write: () => unknown, error: unknown, goOn: (last: unknown) => boolean): Promise<unknown> {
  let last = error;
  for (let i = 0; goOn(last); i++) {
    const pauseMs = pauseBefore(OUTAGE_RETRIES_MS, i);
    if (pauseMs > 0) await pause(pauseMs);
    last = await failureOf(attempt(write));
    if (last === undefined) return undefined;
  }
  return last;
}
