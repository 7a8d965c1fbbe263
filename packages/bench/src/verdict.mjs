// Which failed server/workload runs fail the benchmark's exit code. A full run (`pnpm bench`) fails
// on any failure: its numbers go into docs/benchmarks.md. `--short` is CI's check that every code
// path still runs: there every mcp-kit server must run every workload and every anchor must start,
// but an anchor that then fails a workload (the SDK v1 transport losing a polling client's answer,
// say) is the anchor's bug, reported in the table and not a reason to fail our test run.

/**
 * @param {Record<string, Record<string, { error?: string, phase?: 'start' | 'workload' }>>} results
 *   workload → server → result, as cli.mjs records them
 * @param {{ short: boolean, servers: { name: string, kit?: boolean }[] }} run
 * @returns {{ fatal: Failure[], reported: Failure[] }} with Failure = { workload, server, phase, error }
 */
export function judgeFailures(results, { short, servers }) {
  const fatal = [];
  const reported = [];
  for (const [workload, byServer] of Object.entries(results)) {
    for (const [server, result] of Object.entries(byServer)) {
      if (!result.error) continue;
      const failure = { workload, server, phase: result.phase ?? 'workload', error: result.error };
      const kit = servers.find((s) => s.name === server)?.kit === true;
      if (!short || kit || failure.phase === 'start') fatal.push(failure);
      else reported.push(failure);
    }
  }
  return { fatal, reported };
}

/** The lines a run prints about its failures: what failed the run, and what was only reported. */
export function describeFailures({ fatal, reported }) {
  const line = (f) => `  ${f.workload} ${f.server} (${f.phase === 'start' ? 'did not start' : 'failed'}): ${f.error.split('\n')[0]}`;
  const lines = [];
  if (reported.length > 0)
    lines.push(`${reported.length} anchor workload runs failed (reported, not failing --short):`, ...reported.map(line));
  if (fatal.length > 0) lines.push(`${fatal.length} server/workload runs failed:`, ...fatal.map(line));
  return lines;
}
