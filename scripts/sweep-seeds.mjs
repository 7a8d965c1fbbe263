#!/usr/bin/env node
// Runs every randomized test over many seeds, one `vitest run` per test file and seed (`SEED=<n>`,
// the way a failure is replayed), and reports each failure with the seed that replays it. Not a CI
// stage: a sweep takes hours. Run it niced on a shared machine, with its output in a file:
//
//   nice -n 19 node scripts/sweep-seeds.mjs > .tmp/sweep.log 2>&1 &     # the light tier: Express and Koa, 200 seeds each
//   nice -n 19 node scripts/sweep-seeds.mjs --tier next                   # the same files on next start, 20 seeds each
//   nice -n 19 node scripts/sweep-seeds.mjs --tier heavy                  # the Redis and cluster suites, a few seeds each
//   nice -n 19 node scripts/sweep-seeds.mjs --tier all                    # all three
//   node scripts/sweep-seeds.mjs --only chaos --seeds 20                  # one target, fewer seeds
//   node scripts/sweep-seeds.mjs --file tests/x.test.ts --pattern 'name'  # any file (and test name)
//
// Light targets run in seconds per seed. Heavy ones start redis-server and built instances (a
// minute or more per seed): they run over fewer seeds, and what their seed decides is forced where
// it matters (see each test), so a few seeds check the rest. The seeds are
// the same on every sweep: the first is the one that once failed the chaos test in a fresh clone,
// the others spread over 32 bits. A seed that fails is run once more, and the report says whether
// it failed again. Logs of failed runs go to `.tmp/sweep/`.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const vitest = join(root, 'node_modules', '.bin', 'vitest');

/** Test names of the in-process adapters (vitest's -t matches `<describe> <test>`, `$name` quoted). */
const IN_PROCESS = "'(express|koa)";
const NEXT = "'next";

/**
 * Every test that draws from a seed (`seedFor` in packages/testbed/src/random.ts). `pattern` is
 * vitest's -t: it keeps a file's tests that draw nothing out, and splits the adapters: the light
 * tier runs Express and Koa in the test process, the next tier the same files against `next start`
 * (a build, seconds per start), over fewer seeds; what the seed decides is the same for all three.
 * `seeds` is a tier's default count.
 */
const LIGHT = [
  { name: 'chaos', file: 'tests/reliability/chaos.test.ts' },
  { name: 'fuzz', file: 'tests/reliability/fuzz.test.ts' },
  { name: 'fuzz-modern', file: 'tests/reliability/fuzz-modern.test.ts' },
  { name: 'tasks-chaos', file: 'tests/reliability/tasks-chaos.test.ts' },
  { name: 'isolation', file: 'tests/reliability/isolation.test.ts', pattern: 'a Last-Event-ID from another session' },
];
const TARGETS = [
  ...LIGHT.map((t) => ({ ...t, tier: 'light', seeds: 200, pattern: `${IN_PROCESS}.*${t.pattern ?? ''}` })),
  ...LIGHT.map((t) => ({ ...t, name: `${t.name}-next`, tier: 'next', seeds: 20, pattern: `${NEXT}.*${t.pattern ?? ''}` })),
  { name: 'command-faults', tier: 'heavy', file: 'tests/faults/command-faults.test.ts', seeds: 5 },
  { name: 'pause', tier: 'heavy', file: 'tests/faults/pause.test.ts', seeds: 5 },
  { name: 'redis-outage', tier: 'heavy', file: 'tests/faults/redis-outage.test.ts', seeds: 3 },
  { name: 'redis-restart', tier: 'heavy', file: 'tests/faults/redis-restart.test.ts', seeds: 3 },
  { name: 'redis-network', tier: 'heavy', file: 'tests/faults/redis-network.test.ts', seeds: 3 },
  { name: 'sentinel-failover', tier: 'heavy', file: 'tests/faults/sentinel-failover.test.ts', seeds: 3 },
  { name: 'rolling-restart', tier: 'heavy', file: 'tests/cluster/rolling-restart.test.ts', seeds: 3 },
  { name: 'serverless', tier: 'heavy', file: 'tests/serverless/simulation.test.ts', seeds: 3 },
];

function parseArgs(argv) {
  const args = { tier: 'light', seeds: undefined, only: undefined, timeoutMs: 20 * 60_000 };
  for (let i = 0; i < argv.length; i++) {
    const [flag, value = argv[++i]] = argv[i].split('=', 2);
    if (flag === '--tier') args.tier = value;
    else if (flag === '--seeds') args.seeds = Number(value);
    else if (flag === '--only') args.only = value.split(',');
    else if (flag === '--timeout-min') args.timeoutMs = Number(value) * 60_000;
    else if (flag === '--file') args.file = value;
    else if (flag === '--pattern') args.pattern = value;
    else throw new Error(`unknown argument ${argv[i]} (see the head of scripts/sweep-seeds.mjs)`);
  }
  return args;
}

/** Seed number `k` of every sweep: the fresh-clone failure first, then a Weyl sequence over 32 bits. */
function seedAt(k) {
  return k === 0 ? 519725661 : Math.imul(k, 0x9e3779b1) >>> 0;
}

/** One `vitest run` of `target` with `SEED=seed`: its failures, and its log when it failed. */
function runOnce(target, seed, timeoutMs) {
  const report = join(logs, `${target.name}-${seed}.json`);
  const vitestArgs = ['run', target.file, '--reporter=dot', '--reporter=json', `--outputFile.json=${report}`];
  if (target.pattern) vitestArgs.push('-t', target.pattern);
  const t0 = performance.now();
  const r = spawnSync(vitest, vitestArgs, {
    cwd: root,
    encoding: 'utf8',
    env: { ...process.env, SEED: String(seed) },
    timeout: timeoutMs,
    killSignal: 'SIGKILL',
    maxBuffer: 256 * 1024 * 1024,
  });
  const seconds = ((performance.now() - t0) / 1000).toFixed(1);
  const failures = failuresIn(report) ?? [{ test: '(no report)', message: r.error ? String(r.error) : `exit ${r.status}` }];
  if (r.status !== 0 && failures.length === 0) failures.push({ test: '(run)', message: `exit ${r.status}, no failed test in the report` });
  rmSync(report, { force: true });
  if (failures.length === 0) return { failures, seconds };
  const log = join(logs, `${target.name}-${seed}-${Date.now()}.log`);
  writeFileSync(log, `${r.stdout}\n${r.stderr}`);
  return { failures, seconds, log };
}

/** The tests a vitest JSON report says failed, each with the first lines of its first failure. */
function failuresIn(reportFile) {
  let report;
  try {
    report = JSON.parse(readFileSync(reportFile, 'utf8'));
  } catch {
    return undefined;
  }
  return report.testResults.flatMap((file) =>
    file.assertionResults
      .filter((t) => t.status === 'failed')
      .map((t) => ({ test: t.fullName, message: (t.failureMessages[0] ?? '').split('\n').slice(0, 3).join(' ⏎ ') })),
  );
}

const args = parseArgs(process.argv.slice(2));
const targets = args.file
  ? [{ name: args.file.replace(/^.*\/|\.test\.ts$/g, ''), tier: 'light', file: args.file, pattern: args.pattern }]
  : TARGETS.filter((t) => (args.only ? args.only.includes(t.name) : args.tier === 'all' || t.tier === args.tier));
if (targets.length === 0) throw new Error(`no target: --only ${args.only ?? '-'} --tier ${args.tier}`);
const logs = join(root, '.tmp', 'sweep');
mkdirSync(logs, { recursive: true });

const summary = [];
for (const target of targets) {
  const n = args.seeds ?? target.seeds ?? 200;
  const failed = [];
  let ran = 0;
  const started = performance.now();
  console.log(`\n▶ ${target.name}: ${target.file}${target.pattern ? ` -t "${target.pattern}"` : ''}, ${n} seeds`);
  for (let k = 0; k < n; k++) {
    const seed = seedAt(k);
    const first = runOnce(target, seed, args.timeoutMs);
    ran++;
    if (first.failures.length === 0) {
      console.log(`  seed ${k + 1}/${n} SEED=${seed} ✓ ${first.seconds} s`);
      continue;
    }
    for (const f of first.failures) console.log(`  seed ${k + 1}/${n} SEED=${seed} ✗ ${first.seconds} s ${f.test}: ${f.message}`);
    // A shared machine can starve a timing-sensitive test: the seed is run once more, and the
    // report says whether it failed again (the seed decides) or not (that run's timing did).
    const again = runOnce(target, seed, args.timeoutMs);
    console.log(
      `  seed ${k + 1}/${n} SEED=${seed} ${again.failures.length > 0 ? 'failed again' : 'passed when run again'} (${again.seconds} s)`,
    );
    failed.push({ seed, failures: first.failures, again: again.failures, logs: [first.log, again.log].filter(Boolean) });
  }
  const minutes = ((performance.now() - started) / 60_000).toFixed(1);
  const failedAgain = failed.filter((f) => f.again.length > 0).map((f) => f.seed);
  summary.push({ target: target.name, seeds: ran, failedSeeds: failed.map((f) => f.seed), failedAgain, minutes, failed });
  const which = `SEED=${failed.map((f) => f.seed).join(', ')}; failed again: ${failedAgain.join(', ') || 'none'}`;
  console.log(`◀ ${target.name}: ${ran} seeds, ${failed.length} failed${failed.length ? ` (${which})` : ''}, ${minutes} min`);
}

writeFileSync(join(logs, 'summary.json'), JSON.stringify(summary, null, 2));
console.log('\nsweep summary (target: seeds run; seeds that failed; of those, seeds that failed again):');
for (const s of summary)
  console.log(`  ${s.target}: ${s.seeds}; ${s.failedSeeds.join(' ') || 'none'}; ${s.failedAgain.join(' ') || 'none'} (${s.minutes} min)`);
process.exit(summary.some((s) => s.failedSeeds.length > 0) ? 1 : 0);
