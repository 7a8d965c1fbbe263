#!/usr/bin/env node
// What each cluster mode's tests cost `npm test`, read from the JSON reports of its vitest stages
// (every results/vitest*.json):
//   node scripts/cluster-mode-seconds.mjs [results-dir …]      (default: results/)
// A file's seconds are its wall time in the report (its setup included). Forwarding: the files
// that run only in a forwarding cluster, plus the main lane's run of the suites the shared-cluster
// stage runs again; shared: that stage's run, plus the files that run only in a shared cluster.
// A file that runs both modes itself is split by the time of its tests under each mode's describe.
// Files of neither mode (a single instance, the stores' own suites) are left out. Given several
// results directories (runs), prints each run and the median.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const FORWARD_ONLY = [
  'tests/behaviour/cluster.test.ts',
  'tests/cluster/scale-out-examples.test.ts',
  'tests/cluster/retry-pace.test.ts',
  'tests/faults/drain-peers.test.ts',
  'tests/faults/fencing.test.ts',
  'tests/faults/frozen-owner.test.ts',
  'tests/faults/hand-over.test.ts',
  'tests/faults/hop.test.ts',
  'tests/faults/redis-network.test.ts',
  'tests/faults/thawed-writer.test.ts',
  'packages/redis/test/cluster.test.ts',
  'packages/redis/test/eviction.test.ts',
  'packages/redis/test/fence.test.ts',
  'packages/redis/test/forward.test.ts',
  'packages/redis/test/hop.test.ts',
];
const SHARED_ONLY = [
  'tests/cluster/shared.test.ts',
  'tests/faults/bus-inbox.test.ts',
  'tests/faults/shared-partition.test.ts',
  'tests/faults/shared-subscribe-race.test.ts',
  'tests/faults/thawed-copy.test.ts',
  'tests/serverless/simulation.test.ts',
  'tests/serverless/wait-until.test.ts',
  'packages/redis/test/shared.test.ts',
];
/** Files with a describe per mode (the shared one's title says 'shared'). */
const BOTH_IN_ONE = [
  'tests/cluster/standalone-stream.test.ts',
  'tests/faults/delete-during-outage.test.ts',
  'tests/faults/initialize-during-outage.test.ts',
];

function files(report) {
  const byFile = new Map();
  for (const t of report.testResults) {
    const name = t.name.replace(/^.*?\/((?:tests|packages)\/)/, '$1');
    byFile.set(name, { seconds: (t.endTime - t.startTime) / 1000, tests: t.assertionResults });
  }
  return byFile;
}

/**
 * Every file of the lanes that run in the default (forwarding) mode, or (`shared`) of the stages
 * that run in a shared cluster: `npm test` splits them over several reports (`vitest.json`,
 * `vitest-checks.json`, `vitest-outages.json`, …; `vitest-shared.json`, `vitest-outages-shared.json`).
 */
function lanes(dir, shared) {
  const byFile = new Map();
  for (const name of readdirSync(dir).filter((f) => /^vitest.*\.json$/.test(f) && /-shared\.json$/.test(f) === shared))
    for (const [file, entry] of files(JSON.parse(readFileSync(join(dir, name), 'utf8')))) byFile.set(file, entry);
  return byFile;
}

function secondsOf(dir) {
  if (!existsSync(join(dir, 'vitest-shared.json'))) throw new Error(`${dir} has no vitest-shared.json: run npm test first`);
  const main = lanes(dir, false);
  const shared = lanes(dir, true);
  const sum = (map, names) => names.reduce((a, n) => a + (map.get(n)?.seconds ?? 0), 0);
  const parts = {
    forwardOnly: sum(main, FORWARD_ONLY),
    bothForward: sum(main, [...shared.keys()]),
    bothShared: sum(shared, [...shared.keys()]),
    sharedOnly: sum(main, SHARED_ONLY),
  };
  const out = { forward: parts.forwardOnly + parts.bothForward, shared: parts.bothShared + parts.sharedOnly, parts };
  for (const name of BOTH_IN_ONE) {
    const file = main.get(name);
    if (!file) continue;
    const by = { forward: 0, shared: 0 };
    for (const t of file.tests) by[t.ancestorTitles.some((a) => a.includes('shared')) ? 'shared' : 'forward'] += t.duration ?? 0;
    const total = by.forward + by.shared || 1;
    out.forward += (file.seconds * by.forward) / total;
    out.shared += (file.seconds * by.shared) / total;
    parts.forwardOnly += (file.seconds * by.forward) / total;
    parts.sharedOnly += (file.seconds * by.shared) / total;
  }
  return out;
}

const dirs = process.argv.slice(2).length > 0 ? process.argv.slice(2) : ['results'];
const runs = dirs.map((dir) => ({ dir, ...secondsOf(dir) }));
for (const { dir, forward, shared, parts: p } of runs)
  console.log(
    `${dir}: forwarding ${forward.toFixed(0)} s (${p.forwardOnly.toFixed(0)} in its own files, ${p.bothForward.toFixed(0)} in the suites both modes run), shared ${shared.toFixed(0)} s (${p.sharedOnly.toFixed(0)} in its own files, ${p.bothShared.toFixed(0)} in the shared-cluster stage)`,
  );
if (runs.length > 1) {
  const med = (k) => runs.map((r) => r[k]).sort((a, b) => a - b)[(runs.length - 1) >> 1];
  console.log(`median of ${runs.length} runs (lower): forwarding ${med('forward').toFixed(0)} s, shared ${med('shared').toFixed(0)} s`);
}
