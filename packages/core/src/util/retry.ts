/** Pauses before each new try of a failed store write: at once, then backing off, about 3 s in all. */
const RETRIES_MS = [0, 50, 100, 200, 400, 800, 1_600];

/** The error a write ended with, or `undefined` once it succeeded. */
export function failureOf(write: unknown): Promise<unknown> {
  return Promise.resolve(write).then(
    () => undefined,
    (error: unknown) => error ?? new Error('store write failed'),
  );
}

/**
 * Tries a failed store write again until it succeeds (`undefined`) or the tries run out (its last
 * error): a Redis blip or failover must not lose an event or a task's end (issue 20, items 3, 6).
 * The write must be idempotent.
 */
export async function retried(attempt: () => unknown, error: unknown): Promise<unknown> {
  let last = error;
  for (const pauseMs of RETRIES_MS) {
    if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
    let write: unknown;
    try {
      write = attempt();
    } catch (e) {
      write = Promise.reject(e);
    }
    last = await failureOf(write);
    if (last === undefined) return undefined;
  }
  return last;
}

/** Pauses before each new try of a write that waits out an outage: backing off to once a second. */
const OUTAGE_RETRIES_MS = [0, 50, 100, 200, 400, 800, 1_000];

/**
 * Tries a failed store write again for as long as `goOn()` says (an outage lasts as long as it
 * lasts: no budget of ours is longer than every real one), once a second after the first few tries:
 * `undefined` once it succeeded, or its last error once `goOn(lastError)` said stop. Idempotent writes only.
 */
export async function retriedWhile(attempt: () => unknown, error: unknown, goOn: (last: unknown) => boolean): Promise<unknown> {
  let last = error;
  for (let i = 0; goOn(last); i++) {
    const pauseMs = OUTAGE_RETRIES_MS[Math.min(i, OUTAGE_RETRIES_MS.length - 1)] as number;
    if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
    let write: unknown;
    try {
      write = attempt();
    } catch (e) {
      write = Promise.reject(e);
    }
    last = await failureOf(write);
    if (last === undefined) return undefined;
  }
  return last;
}

/**
 * Pauses before each new try of a store operation a waiting request depends on (a replay, an
 * owner lookup, a stream's registration). It is tried again at once and twice more within ~150 ms
 * before the request is answered 503: an SDK v1 client gives a failed resume only two more tries
 * before it stops listening and waits for its request timeout, so a one-command blip must not
 * reach it (issue 20: a call under random command failures hung that way).
 */
const BRIEF_RETRIES_MS = [0, 50, 100];

/** After `op` failed once: runs it again until it succeeds, or throws its last error once the tries run out. Idempotent operations only. */
export async function brieflyRetried<T>(op: () => T | Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    await new Promise((resolve) => setTimeout(resolve, BRIEF_RETRIES_MS[i]));
    try {
      return await op();
    } catch (error) {
      if (i === BRIEF_RETRIES_MS.length - 1) throw error;
    }
  }
}
