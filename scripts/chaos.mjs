#!/usr/bin/env node
// `pnpm test:chaos`: the reliability and fault suites at their long durations (LONG=1), one file
// at a time, first in forwarding mode (every suite), then the outages and the rolling restart
// again in a shared cluster (MCP_KIT_CLUSTER=shared, no internalUrl). Both runs go to their end;
// the exit code is the first failed run's. Arguments after the script name go to both vitest runs.
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

const RUNS = [
  {
    mode: 'forwarding',
    env: {},
    files: [
      'tests/reliability/chaos.test.ts',
      'tests/reliability/faults.test.ts',
      'tests/reliability/load.test.ts',
      'tests/reliability/tasks-chaos.test.ts',
      'tests/cluster/rolling-restart.test.ts',
      'tests/faults',
    ],
  },
  {
    mode: 'shared',
    env: { MCP_KIT_CLUSTER: 'shared' },
    files: [
      'tests/faults/redis-outage.test.ts',
      'tests/faults/sentinel-failover.test.ts',
      'tests/faults/redis-network.test.ts',
      'tests/cluster/rolling-restart.test.ts',
    ],
  },
];

const vitest = join(root, 'node_modules', '.bin', 'vitest');
const summary = [];
let code = 0;
for (const run of RUNS) {
  const started = performance.now();
  console.log(`\n▶ test:chaos, ${run.mode} mode: ${run.files.join(' ')}`);
  const r = spawnSync(vitest, ['run', '--no-file-parallelism', ...run.files, ...process.argv.slice(2)], {
    cwd: root,
    stdio: 'inherit',
    env: { ...process.env, LONG: '1', ...run.env },
  });
  const status = r.status ?? 1;
  if (status !== 0 && code === 0) code = status;
  summary.push(`${status === 0 ? '✓' : '✗'} ${run.mode} mode: exit ${status} in ${((performance.now() - started) / 1000).toFixed(1)} s`);
}
console.log(`\n${summary.join('\n')}`);
process.exit(code);
