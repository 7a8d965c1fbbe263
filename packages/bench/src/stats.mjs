// Small numeric helpers for the workloads.
export function percentile(values, p) {
  if (values.length === 0) return NaN;
  const sorted = Float64Array.from(values).sort();
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank];
}

export const median = (values) => percentile(values, 50);

/** Runs `task(i)` for i in [0, count) with at most `concurrency` at a time; returns the results. */
export async function runPool(count, concurrency, task) {
  const results = new Array(count);
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      results[i] = await task(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  return results;
}

/** CPU time the server process spent between two `/bench/stats` readings, in microseconds. */
export function cpuUs(before, after) {
  return after.cpuUserUs + after.cpuSystemUs - before.cpuUserUs - before.cpuSystemUs;
}
