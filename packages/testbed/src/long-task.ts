/**
 * The fixture's `long_task` (DESIGN.md, "Example apps and fixtures") as the suites, demos and
 * benchmarks call it: the shapes of a call, and what a call must produce (every step once and in
 * order, then `completed <steps> steps`).
 */

/** `long_task`'s arguments. */
export interface LongTask {
  steps: number;
  intervalMs: number;
  closeEvery?: number;
  retryMs?: number;
}

/**
 * 2025 era: closes after steps 4 and 8, 120 ms apart, each asking for a 20 ms reconnect, so the
 * client is back well before the next close (a close that finds no connection would merge two
 * reconnects into one: a test's bound on the resumes, from POLLED_CLOSES, allows it on a very slow
 * machine).
 */
export const POLLED_TASK = { steps: 12, intervalMs: 30, closeEvery: 4, retryMs: 20 };
export const POLLED_CLOSES = 2;

/** 2026 era: no resumption, the whole call on the request's own stream. */
export const STREAMED_TASK = { steps: 10, intervalMs: 5 };

/** `closeEvery` sent by a 2026 client: closeSSEStream must decline, the stream stays whole. */
export const UNCLOSABLE_TASK = { steps: 6, intervalMs: 5, closeEvery: 2, retryMs: 20 };

/** The result of a `long_task` of `steps` steps. */
export const completed = (steps: number) => [{ type: 'text', text: `completed ${steps} steps` }];
/** `1..n`: the steps a `long_task` of `n` steps logs, in order. */
export const oneTo = (n: number): number[] => Array.from({ length: n }, (_, i) => i + 1);

/** The `{ step }` of a long_task log notification's data, if it is one. */
export function stepOf(data: unknown): number | undefined {
  const step = (data as { step?: unknown } | null)?.step;
  return typeof step === 'number' ? step : undefined;
}
