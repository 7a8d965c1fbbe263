#!/usr/bin/env node
// The README's two commands: `npm run demo` and `npm test`. Works on a machine with only Node.js
// and npm: pnpm comes through npx (pinned), dependencies are installed on first use.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { runLanes, runStage, stopAll, timingTable } from './stages.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const PNPM = ['-y', 'pnpm@10.34.9'];

/**
 * `npm test` runs pnpm a dozen times (each stage, and the scripts that call it again): npx
 * resolving it costs ~3.5 CPU-s a call. Asked once where npx keeps the pinned pnpm, and that
 * directory put first on the PATH of every stage; `npx` as before when the answer is not usable.
 */
function pinnedPnpm() {
  const found = spawnSync('npx', ['-y', '-p', PNPM[1], '--', 'sh', '-c', 'command -v pnpm'], {
    cwd: root,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const bin = found.stdout?.trim() ?? '';
  if (found.status !== 0 || !bin.startsWith('/') || !existsSync(bin)) return { cmd: 'npx', args: PNPM };
  process.env.PATH = `${dirname(bin)}:${process.env.PATH ?? ''}`;
  return { cmd: bin, args: [] };
}
process.env.NEXT_TELEMETRY_DISABLED = '1';
process.env.TURBO_TELEMETRY_DISABLED = '1';
process.env.DO_NOT_TRACK = '1';

function run(cmd, args, opts = {}) {
  console.log(`\n$ ${cmd} ${args.join(' ')}`);
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', env: process.env, ...opts });
  return r.status ?? 1;
}

function must(cmd, args) {
  const status = run(cmd, args);
  if (status !== 0) {
    console.error(`\n✗ ${cmd} ${args.join(' ')} failed (exit ${status})`);
    process.exit(status);
  }
}

function prepare() {
  if (!existsSync(join(root, 'node_modules', '.modules.yaml'))) must('npx', [...PNPM, 'install', '--frozen-lockfile']);
  must('npx', [...PNPM, 'build']);
}

/**
 * What the tests need from Debian's packages, and how to tell each is there: a real redis-server
 * (the Redis tests start one on a free port), Python's venv (the Python SDK client tests make a
 * virtualenv) and Chromium (the live page's test). A fresh machine may lack them: installed with apt-get when we run as root.
 */
const SYSTEM_NEEDS = [
  { pkg: 'redis-server', check: ['redis-server', ['--version']], why: 'Redis 7 for the Redis tests' },
  { pkg: 'python3-venv', check: ['python3', ['-c', 'import ensurepip, venv']], why: "Python's venv for the Python SDK client tests" },
  { pkg: 'chromium', check: ['/usr/bin/chromium', ['--version']], why: "Chromium for the live page's test (driven by playwright-core)" },
];

function ensureSystemPackages() {
  const missing = SYSTEM_NEEDS.filter(({ check: [cmd, args] }) => spawnSync(cmd, args, { stdio: 'ignore' }).status !== 0);
  if (missing.length === 0) return;
  const names = missing.map((m) => m.pkg);
  if (process.getuid?.() !== 0 || spawnSync('apt-get', ['--version'], { stdio: 'ignore' }).status !== 0) {
    for (const m of missing) console.error(`✗ ${m.pkg} is missing (${m.why})`);
    console.error(`  install it (e.g. \`sudo apt-get install -y ${names.join(' ')}\`) and rerun`);
    process.exit(1);
  }
  must('apt-get', ['update']);
  must('apt-get', ['install', '-y', ...names]);
}

/**
 * Test files moved out of the vitest lane, or between the others, so the four lanes end about
 * together: seconds in the fresh clone's run of 52fd37a (lanes: vitest 575, checks 501 of which
 * bench --short 170, outages 557, shared outages 553; wall clock 661), before bench --short ran
 * half its servers (~90 s less in the checks lane): load 42, retry-pace 23, rolling-restart 54,
 * shared-lost-stream 19, verdict 22 and tasks-chaos 27 (now in the checks lane); fuzz 31 and 21,
 * modern 12, isolation 31; scale-out-examples 56, live-streams 43.
 */
const CHECKS_LANE_TESTS = [
  'tests/reliability/load.test.ts',
  'tests/cluster/retry-pace.test.ts',
  'tests/cluster/rolling-restart.test.ts',
  'tests/faults/shared-lost-stream.test.ts',
  'packages/bench/test/verdict.test.ts',
  'tests/reliability/tasks-chaos.test.ts',
];
const AFTER_OUTAGES_TESTS = [
  'tests/reliability/fuzz.test.ts',
  'tests/reliability/fuzz-modern.test.ts',
  'tests/behaviour/modern.test.ts',
  'tests/reliability/isolation.test.ts',
];
const AFTER_SHARED_OUTAGES_TESTS = ['tests/cluster/scale-out-examples.test.ts', 'packages/redis/test/live-streams.test.ts'];

/**
 * The outages (Redis down, failing over, unreachable) and the other fault suites that mostly wait (for Redis to come back, a
 * replica to be promoted, a black hole to end, a frozen instance to thaw, a client's paced
 * reconnect), in a lane of their own while the CPU serves the others. They assert no timing
 * tighter than `commandTimeoutMs` + 1 s. Seconds in the vitest lane of a fresh clone's run of
 * 91db208: frozen-owner 20, pause 20, redis-restart 20, delete-during-outage 15, thawed-copy 10.
 */
const OUTAGE_LANE_TESTS = [
  'tests/faults/redis-outage.test.ts',
  'tests/faults/redis-network.test.ts',
  'tests/faults/sentinel-failover.test.ts',
  'tests/faults/frozen-owner.test.ts',
  'tests/faults/pause.test.ts',
  'tests/faults/redis-restart.test.ts',
  'tests/faults/delete-during-outage.test.ts',
  'tests/faults/thawed-copy.test.ts',
  // The packed packages installed with npm beside the current Express, Koa, Next.js, SDKs and
  // ioredis 6, then ioredis 5: ~50 s with npm's cache warm, mostly npm writing Next.js to disk.
  'tests/packaging/packed-install.test.ts',
];

/**
 * The cluster suites that run a second time in a shared cluster (no internalUrl), after
 * the shared outages in their lane: MCP_KIT_CLUSTER=shared makes packages/testbed/src/cluster.ts start every instance so.
 */
const SHARED_CLUSTER_TESTS = [
  'tests/cluster/rolling-restart.test.ts',
  'tests/cluster/crash.test.ts',
  'tests/cluster/principals.test.ts',
  'tests/cluster/tasks.test.ts',
  // The fault battery's scenarios that have a shared-cluster meaning (fencing, hops and hand-overs
  // between peers are about owners and forwarding: those run in forwarding mode only).
  'tests/faults/pause.test.ts',
  'tests/faults/redis-restart.test.ts',
  'tests/faults/command-faults.test.ts',
];

/**
 * The outages in a shared cluster too, in a lane of their own beside the outages: Redis down 1 s, 5 s and
 * 30 s (resumes sent back to come later, appends held in order), a Sentinel failover (the bus and
 * tail subscribers follow the promotion too), a network to Redis that delays, resets and
 * black-holes.
 */
const SHARED_OUTAGE_TESTS = [
  'tests/faults/redis-outage.test.ts',
  'tests/faults/sentinel-failover.test.ts',
  'tests/faults/redis-network.test.ts',
];

/**
 * On a Redis Cluster (MCP_KIT_REDIS=cluster: 3 masters and 3 replicas of redis-server
 * --cluster-enabled yes, which the instances find through REDIS_CLUSTER_NODES), in a lane of its
 * own: the cluster suites that show a session and a task outliving their instance there (resume
 * on another instance, crash, tasks, the rolling restart under load), Redis down 1 s, 5 s and 30 s
 * (every node stopped), and the cluster's own faults (a master killed or paused past
 * cluster-node-timeout, a resharding under live calls); then again in a shared cluster, but the
 * resume suite (its apps' scenarios are forwarding's). Alone on this machine (load average 5–8
 * from other work): forwarding ~320 s, shared ~220 s.
 */
const REDIS_CLUSTER_TESTS = [
  'tests/cluster/scale-out-examples.test.ts',
  'tests/cluster/crash.test.ts',
  'tests/cluster/tasks.test.ts',
  'tests/cluster/rolling-restart.test.ts',
  'tests/faults/redis-outage.test.ts',
  'tests/faults/redis-cluster-failover.test.ts',
  'tests/faults/redis-cluster-reshard.test.ts',
];
const REDIS_CLUSTER_SHARED_TESTS = REDIS_CLUSTER_TESTS.filter((file) => file !== 'tests/cluster/scale-out-examples.test.ts');

/**
 * The Redis suites a second time on ioredis 6 (MCP_KIT_IOREDIS=6: vitest.config.ts maps `ioredis` to
 * the root devDependency `ioredis6`, in the tests and in the apps they start), since the workspace
 * builds against 5 and npm gives a user 6, which speaks RESP3: packages/redis/test, and fault
 * suites that put the RESP fault proxy between the instances and Redis (commands failing at
 * random, the task store's failures, a bus subscriber's reset). live-streams is left out: it
 * counts what an instance holds after 10,000 streams (43 s), which the wire protocol does not change.
 */
const IOREDIS6_TESTS = [
  'packages/redis/test/',
  'tests/faults/ioredis-major.test.ts',
  'tests/faults/command-faults.test.ts',
  'tests/faults/task-store-failure.test.ts',
  'tests/faults/shared-subscribe-race.test.ts',
];

/**
 * `npm test`. After install and build, five lanes run at once on the machine's two cores: vitest
 * (one worker: its files start servers and wait on them); the checks that need no vitest
 * (typecheck, lint, the bench's short mode, the conformance suite against every example app,
 * every command the docs show: scripts/doc-commands.mjs); the outages and fault suites that mostly
 * wait; the outages and the cluster suites in a shared cluster; the cluster suites on a Redis Cluster. Each lane ends with a few test files that balance the lanes.
 * Every stage runs to its end whatever another did; the closing line counts vitest's tests plus one
 * per bench and conformance run, and a failed typecheck or lint counts as a failure.
 */
async function test() {
  const started = performance.now();
  const timed = [];
  const at = performance.now();
  ensureSystemPackages();
  timed.push({ name: 'system packages', code: 0, seconds: (performance.now() - at) / 1000 });
  const options = { cwd: root, logDir: join(root, 'results', 'logs') };
  const pnpm = pinnedPnpm();
  const setup = [{ name: 'build', cmd: pnpm.cmd, args: [...pnpm.args, 'build'] }];
  if (!existsSync(join(root, 'node_modules', '.modules.yaml')))
    setup.unshift({ name: 'install', cmd: pnpm.cmd, args: [...pnpm.args, 'install', '--frozen-lockfile'] });
  for (const stage of setup) {
    const result = await runStage(stage, options);
    timed.push(result);
    if (result.code !== 0) {
      console.log(`\n${timingTable(timed, (performance.now() - started) / 1000)}`);
      process.exit(result.code);
    }
  }
  mkdirSync(join(root, 'results'), { recursive: true });
  // --isolate=false: the files of a stage run one after the other in one worker process, which
  // imports the SDKs, ioredis and the sources once instead of once per file (~70 s of 640 in the
  // vitest lane on 2 cores). Developers' `vitest run` keeps each file in a fresh process.
  const vitestRun = (report, files) => [
    ...pnpm.args,
    'exec',
    'vitest',
    'run',
    '--isolate=false',
    '--reporter=default',
    '--reporter=json',
    `--outputFile.json=${report}`,
    ...files,
  ];
  const stage = (name, report, files, env) => ({
    name,
    cmd: pnpm.cmd,
    args: vitestRun(`results/${report}.json`, files),
    env,
    counts: 'vitest',
    report: `results/${report}.json`,
  });
  const moved = [
    ...CHECKS_LANE_TESTS,
    ...AFTER_OUTAGES_TESTS,
    ...AFTER_SHARED_OUTAGES_TESTS,
    ...OUTAGE_LANE_TESTS,
    'tests/faults/redis-cluster-failover.test.ts',
    'tests/faults/redis-cluster-reshard.test.ts',
  ];
  const shared = { MCP_KIT_CLUSTER: 'shared' };
  const onRedisCluster = { MCP_KIT_REDIS: 'cluster' };
  const lanes = {
    // Every vitest project (tests/projects.ts) but the files the other lanes run. Named by an
    // environment variable that vitest.config.ts reads: vitest 4 passes `--exclude` to no project.
    vitest: [stage('vitest', 'vitest', [], { MCP_KIT_TEST_EXCLUDE: moved.join(',') })],
    checks: [
      // The packages and next-example are type-checked by their build (tsup --dts, next build fail on
      // a type error in any file their entry points reach): the rest here (`pnpm typecheck` is all).
      { name: 'typecheck', cmd: pnpm.cmd, args: [...pnpm.args, 'run', 'typecheck:unbuilt'], counts: 'failure' },
      { name: 'lint', cmd: pnpm.cmd, args: [...pnpm.args, 'run', 'lint'], counts: 'failure' },
      // The benchmark is not a test: CI only checks that its short mode still runs end to end (not
      // its Next servers, whose app would be built for it: next-example covers the Next adapter).
      { name: 'bench --short --no-next', cmd: pnpm.cmd, args: [...pnpm.args, 'run', 'bench', '--short', '--no-next'], counts: 'one' },
      // A deployment in small (3,000 sessions on 3 instances per cluster mode): it fails when a
      // session is lost; its figures are not read here.
      { name: 'bench:scale --short', cmd: pnpm.cmd, args: [...pnpm.args, 'run', 'bench:scale', '--short'], counts: 'one' },
      ...conformanceStages(),
      // Every command a README or a doc tells a user to run, in its short form (the demos with
      // --once, the example apps until they answer): ~2.5 min, mostly waiting on the demos' timers.
      { name: 'doc commands', cmd: 'node', args: ['scripts/doc-commands.mjs'], counts: 'vitest', report: 'results/doc-commands.json' },
      stage('vitest (checks lane)', 'vitest-checks', CHECKS_LANE_TESTS),
    ],
    outages: [
      stage('vitest (outages)', 'vitest-outages', OUTAGE_LANE_TESTS),
      stage('vitest (after the outages)', 'vitest-after-outages', AFTER_OUTAGES_TESTS),
    ],
    'outages+': [
      stage('vitest (outages, shared cluster)', 'vitest-outages-shared', SHARED_OUTAGE_TESTS, shared),
      stage('vitest (shared cluster)', 'vitest-shared', SHARED_CLUSTER_TESTS, shared),
      stage('vitest (after the shared outages)', 'vitest-after-shared-outages', AFTER_SHARED_OUTAGES_TESTS),
      stage('vitest (ioredis 6)', 'vitest-ioredis6', IOREDIS6_TESTS, {
        MCP_KIT_IOREDIS: '6',
        MCP_KIT_TEST_EXCLUDE: 'packages/redis/test/live-streams.test.ts',
      }),
    ],
    'redis cluster': [
      stage('vitest (Redis Cluster)', 'vitest-redis-cluster', REDIS_CLUSTER_TESTS, onRedisCluster),
      stage('vitest (Redis Cluster, shared cluster)', 'vitest-redis-cluster-shared', REDIS_CLUSTER_SHARED_TESTS, {
        ...onRedisCluster,
        ...shared,
      }),
    ],
  };
  const results = await runLanes(lanes, options);
  timed.push(...results);
  let passed = 0;
  let failed = 0;
  for (const r of results) {
    if (r.counts === 'vitest') {
      const n = vitestCounts(r.code, r.report);
      passed += n.passed;
      failed += n.failed;
    } else if (r.code !== 0) failed++;
    else if (r.counts === 'one') passed++;
  }
  console.log(`\n${timingTable(timed, (performance.now() - started) / 1000)}`);
  console.log(`\ntests: ${passed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
}

/** Each example app with each SDK major, at each revision it must conform to (scripts/conformance-apps.json). */
function conformanceStages() {
  const apps = JSON.parse(readFileSync(join(root, 'scripts', 'conformance-apps.json'), 'utf8'));
  return apps.map(({ app, env = {}, requirements = [], expectedFailures }) => {
    const settings = Object.entries(env).map(([k, v]) => `${k}=${v}`);
    const args = ['scripts/conformance.mjs', app];
    if (requirements.length > 0) args.push('--requirements', requirements.join(','));
    if (expectedFailures) args.push('--expected-failures', expectedFailures);
    return { name: `conformance ${app}${settings.length > 0 ? ` ${settings.join(' ')}` : ''}`, cmd: 'node', args, env, counts: 'one' };
  });
}

/** vitest's own counts from its JSON report; a run that reported nothing, or failed without a failed test, is one failure. */
function vitestCounts(code, file) {
  try {
    const report = JSON.parse(readFileSync(join(root, file), 'utf8'));
    const failed = report.numFailedTests + (report.numTotalTests === 0 ? 1 : 0);
    return { passed: report.numPassedTests, failed: code !== 0 && failed === 0 ? 1 : failed };
  } catch {
    return { passed: 0, failed: 1 };
  }
}

const task = process.argv[2];
if (task === 'demo') {
  prepare();
  process.exit(run('node', ['scripts/demo.mjs', ...process.argv.slice(3)]));
} else if (task === 'test') {
  for (const signal of ['SIGINT', 'SIGTERM']) {
    process.on(signal, () => {
      stopAll();
      process.exit(130);
    });
  }
  await test();
} else {
  console.error('usage: node scripts/run.mjs demo|test');
  process.exit(2);
}
