#!/usr/bin/env node
// Runs the official MCP conformance suite (server side) against one example app.
//
//   node scripts/conformance.mjs <app> [--requirements <rev>[,<rev>]] [--expected-failures <file>]
//                                      [--scenario <name>]... [--results <dir>] [--verbose]
//
// <app> is a workspace app under apps/ (e.g. express-example). The script starts it with
// `PORT=<free port> HOST=127.0.0.1 pnpm --filter <app> start` (the app also gets this process's
// environment, e.g. MCP_SDK=v1), waits for the port, runs the suite, prints a summary and stops the
// app. Exit code: 0 = conformant, 1 = a scenario failed, 2 = could not run.
//
// - `--requirements 2025-11-25|2026-07-28` (comma-separated or repeated: one app start, one suite
//   run per revision) runs exactly the scenarios that revision requires (the suite's
//   requirements/<rev>.yaml), at that revision's wire. Only *scored* scenarios fail the run, plus
//   those the suite leaves unscored that mcp-kit requires anyway (REQUIRED_BY_MCP_KIT: SEP-1699
//   polling, the tasks-* extension, …); the rest (pending ones) are run and reported separately,
//   and never fail it.
// - `--expected-failures <file>`: the suite's baseline, YAML `server: [scenario | scenario:check-id]`,
//   for what the server under test cannot do. `{revision}` in the path is replaced per revision (a
//   missing file is an empty baseline). As in the suite: with a baseline, a WARNING is a deviation
//   too, a listed failure passes, and a listed entry that now passes is stale and fails the run.
// - Without --requirements: the suite's default ("active") server scenarios plus ALWAYS_RUN.
//
// `--url <http://127.0.0.1:port/mcp>` (undocumented on purpose) skips starting an app and tests a
// server that is already running, e.g. a baseline built on the SDK's own transport.

import { spawn, spawnSync } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SUITE_PACKAGE = createRequire(path.join(ROOT, 'package.json')).resolve('@modelcontextprotocol/conformance/package.json');
const HOST = '127.0.0.1';

/** Scenarios the active suite leaves out (pending upstream) or that we must never lose. */
const ALWAYS_RUN = ['server-sse-polling', 'server-session-lifecycle', 'json-schema-2020-12'];

/**
 * Checks that must be SUCCESS, not merely "not FAILURE": a transport that never closes the POST
 * stream gets INFO for the resume check, and a server refusing DELETE gets SKIPPED.
 */
const MUST_SUCCEED = {
  'server-sse-polling': ['server-sse-priming-event', 'server-sse-retry-field', 'server-sse-disconnect-resume'],
  'server-session-lifecycle': [
    'server-session-initialized-accepted',
    'server-session-delete-accepted',
    'server-session-terminated-returns-404',
  ],
};
/** Scenarios where a WARNING counts as a failure (SEP-1699 is the point of this project). */
const NO_WARNINGS = new Set(['server-sse-polling']);

/**
 * Scenarios a revision's requirements run but do not score, which mcp-kit must pass all the same:
 * SEP-1699 polling and session teardown are what it is for, the 2020-12 schema is the fixture's,
 * the 2026 routing-header checks (-32020) are core's own wire rules, and the Tasks extension
 * (SEP-2663) is how a 2026 client polls a long call.
 */
const REQUIRED_BY_MCP_KIT = {
  '2025-11-25': ['server-sse-polling', 'server-session-lifecycle', 'json-schema-2020-12'],
  '2026-07-28': [
    'json-schema-2020-12',
    'http-header-validation',
    'tasks-lifecycle',
    'tasks-capability-negotiation',
    'tasks-wire-fields',
    'tasks-request-state-removal',
    'tasks-mrtr-input',
    'tasks-request-headers',
    'tasks-dispatch-and-envelope',
    'tasks-status-notifications',
    'tasks-required-task-error',
    'tasks-mrtr-composition',
  ],
};

const STARTUP_TIMEOUT_MS = 90_000; // a cold `next start` on a busy machine
const SCENARIO_TIMEOUT_MS = 30_000; // the suite's own per-scenario limit
const SUITE_TIMEOUT_MS = 15 * 60_000; // includes a first-time download of node@22
const STOP_GRACE_MS = 5_000;

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const app = args.app === undefined ? undefined : readApp(args.app);
  const sdk = process.env.MCP_SDK ? `-${process.env.MCP_SDK.replace(/[^\w.-]/g, '_')}` : '';
  const label = args.url ? new URL(args.url).host.replace(/[^\w.-]/g, '_') : `${args.app}${sdk}`;
  const resultsDir = path.resolve(args.results ?? path.join(ROOT, 'results', 'conformance', `${label}-${stamp()}`));
  mkdirSync(resultsDir, { recursive: true });

  // Children run in their own process groups, so a Ctrl-C reaches only this script: stop them here.
  process.on('SIGINT', () => exit(130));
  process.on('SIGTERM', () => exit(143));

  const started = Date.now();
  let url = args.url;
  if (app) {
    const port = await freePort();
    url = `http://${HOST}:${port}/mcp`;
    const env = process.env.MCP_SDK ? `, MCP_SDK=${process.env.MCP_SDK}` : '';
    console.log(`Starting ${app.name} on ${HOST}:${port}${env} (log: ${path.relative(ROOT, path.join(resultsDir, 'app.log'))})`);
    await startApp(app, port, path.join(resultsDir, 'app.log'), args.verbose);
  }

  const cli = conformanceCli();
  let verdicts;
  if (args.requirements.length > 0) {
    // One suite per revision, at once against the one app: each makes its own sessions (and the
    // 2025 suite's 8 s then hide inside the 2026 suite's 16 s).
    const runs = args.requirements.map((revision) => runRequirements(cli, url, revision, args.expectedFailures, resultsDir, args.verbose));
    verdicts = (await Promise.all(runs)).flat();
    printRequirementsSummary(verdicts, args.requirements);
  } else {
    verdicts = (await runDefault(cli, url, args.scenarios, resultsDir, args.verbose)).map((run) => judge(run));
    printSummary(verdicts);
  }
  writeFileSync(path.join(resultsDir, 'summary.json'), JSON.stringify({ url, env: { MCP_SDK: process.env.MCP_SDK }, verdicts }, null, 2));
  const counted = verdicts.filter((v) => v.kind !== 'unscored');
  const failed = counted.filter((v) => !v.ok);
  const skipped = counted.filter((v) => v.ok && v.skipped).length;
  const ran = counted.length - skipped;
  console.log(
    `\n${failed.length === 0 ? 'PASS' : 'FAIL'}: ${ran - failed.length}/${ran} scenarios passed` +
      (skipped > 0 ? `, ${skipped} skipped by the suite itself` : '') +
      ` in ${((Date.now() - started) / 1000).toFixed(1)} s (results: ${path.relative(process.cwd(), resultsDir) || '.'})`,
  );
  return failed.length === 0 ? 0 : 1;
}

/** Without --requirements: the given scenarios, or the suite's active set plus ALWAYS_RUN. */
async function runDefault(cli, url, scenarios, resultsDir, verbose) {
  const runs = []; // { scenario, checks } or { scenario, error }
  if (scenarios.length > 0) {
    for (const scenario of scenarios) runs.push(...(await runOne(cli, url, scenario, resultsDir, verbose)));
    return runs;
  }
  console.log(`Running the default (active) server suite against ${url}`);
  const out = path.join(resultsDir, 'suite');
  const logFile = path.join(resultsDir, 'suite.log');
  const { code, stdout } = await runSuite(cli, ['--url', url, '-o', out], logFile, verbose);
  const attempted = attemptedScenarios(stdout);
  if (attempted.length === 0) throw new Error(`the suite ran no scenarios (exit ${code}); see ${logFile}`);
  runs.push(...collect(attempted, out, logFile));
  const extra = ALWAYS_RUN.filter((s) => !attempted.includes(s));
  console.log(`Suite ran ${attempted.length} scenarios; running ${extra.join(', ') || 'nothing'} explicitly`);
  for (const scenario of extra) runs.push(...(await runOne(cli, url, scenario, resultsDir, verbose)));
  if (code !== 0 && runs.every((r) => judge(r).ok)) {
    runs.push({ scenario: '(suite exit code)', error: `suite exited ${code} but no failing check was found` });
  }
  return runs;
}

/**
 * One revision's requirement set, in one suite run. Verdicts are ours, from each scenario's
 * checks.json; the suite's exit code (which covers scored scenarios only) must agree with them.
 */
async function runRequirements(cli, url, revision, expectedFailures, resultsDir, verbose) {
  const plan = readRequirements(revision);
  const baselineFile = expectedFailures?.replaceAll('{revision}', revision);
  const baseline = baselineFile && existsSync(baselineFile) ? readBaseline(baselineFile) : undefined;
  const out = path.join(resultsDir, revision);
  const logFile = path.join(resultsDir, `${revision}.log`);
  const suiteArgs = ['--url', url, '--requirements', revision, '-o', out];
  if (baseline) suiteArgs.push('--expected-failures', baselineFile);
  console.log(`Running the ${revision} requirements against ${url}${baseline ? ` (baseline ${path.relative(ROOT, baselineFile)})` : ''}`);
  const startedAt = Date.now();
  const { code, stdout } = await runSuite(cli, suiteArgs, logFile, verbose);
  const seconds = (Date.now() - startedAt) / 1000;
  const attempted = attemptedScenarios(stdout);
  if (attempted.length === 0) throw new Error(`the suite ran no scenarios (exit ${code}); see ${logFile}`);
  // A scenario the plan names but the suite never started counts as failed, not as absent.
  const expected = [...plan.scored, ...plan.requiredByUs, ...plan.unscored.keys()];
  const runs = collect([...new Set([...attempted, ...expected])], out, logFile);
  const verdicts = runs.map((run) => {
    const kind = plan.scored.includes(run.scenario) ? 'scored' : plan.requiredByUs.includes(run.scenario) ? 'mcp-kit' : 'unscored';
    const judged = judge(run, kind === 'unscored' ? undefined : baseline);
    return { ...judged, revision, kind, unscoredReason: plan.unscored.get(run.scenario) };
  });
  for (const entry of baseline?.entries ?? []) {
    if (!runs.some((r) => r.scenario === entry.scenario)) {
      verdicts.push(problemVerdict(revision, entry.scenario, `baseline entry ${entry.text} names a scenario this revision did not run`));
    }
  }
  const scoredOk = verdicts.filter((v) => v.kind === 'scored').every((v) => v.ok);
  if ((code === 0) !== scoredOk) {
    verdicts.push(
      problemVerdict(revision, '(suite exit code)', `the suite exited ${code}, but our scored verdict is ${scoredOk ? 'pass' : 'fail'}`),
    );
  }
  console.log(`  ${revision}: ${attempted.length} scenarios in ${seconds.toFixed(1)} s`);
  return verdicts;
}

function problemVerdict(revision, scenario, problem) {
  return { scenario, revision, kind: 'scored', ok: false, counts: emptyCounts(), expected: [], problems: [problem] };
}

function attemptedScenarios(stdout) {
  return [...stdout.matchAll(/^=== Running scenario: (\S+) ===$/gm)].map((m) => m[1]);
}

// ---------------------------------------------------------------------------------------------
// Arguments, requirement sets, baselines and the app under test

function parseArgs(argv) {
  const args = {
    app: undefined,
    url: undefined,
    scenarios: [],
    requirements: [],
    expectedFailures: undefined,
    results: undefined,
    verbose: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      const next = argv[++i];
      if (next === undefined || next.startsWith('--')) usage(`${arg} needs a value`);
      return next;
    };
    if (arg === '--scenario') args.scenarios.push(...value().split(','));
    else if (arg === '--requirements') args.requirements.push(...value().split(','));
    else if (arg === '--expected-failures') args.expectedFailures = path.resolve(value());
    else if (arg === '--url') args.url = value();
    else if (arg === '--results') args.results = value();
    else if (arg === '--verbose') args.verbose = true;
    else if (arg === '--help' || arg === '-h') usage();
    else if (arg.startsWith('--')) usage(`unknown option ${arg}`);
    else if (args.app === undefined) args.app = arg;
    else usage(`unexpected argument ${arg}`);
  }
  if (!args.app === !args.url) usage('give one app name');
  if (args.url) {
    const { hostname } = new URL(args.url);
    // dns-rebinding-protection only means something against a loopback URL.
    if (!['127.0.0.1', 'localhost', '[::1]'].includes(hostname)) usage('--url must point at 127.0.0.1');
  }
  if (args.requirements.length > 0 && args.scenarios.length > 0) usage('--scenario and --requirements do not mix');
  if (args.expectedFailures && args.requirements.length === 0) usage('--expected-failures needs --requirements');
  for (const revision of args.requirements) {
    if (!existsSync(requirementsFile(revision))) usage(`the suite has no requirements for ${revision} (see its requirements/ folder)`);
  }
  return args;
}

function usage(problem) {
  if (problem) console.error(`conformance: ${problem}\n`);
  console.error(`Usage: node scripts/conformance.mjs <app> [--requirements <rev>[,<rev>]] [--expected-failures <file>]
                                   [--scenario <name>]... [--results <dir>] [--verbose]

  <app>                     workspace app under apps/ (its \`start\` script must honour PORT and HOST)
  --requirements <rev>      run what spec revision <rev> requires (2025-11-25, 2026-07-28; comma-separated
                            or repeated); only scored scenarios and the unscored ones mcp-kit requires
                            (SEP-1699 polling, the tasks-* extension, …) fail the run
  --expected-failures <f>   the suite's baseline (YAML server: [scenario | scenario:check-id]); {revision} in
                            the path is replaced per revision, a missing file means none
  --scenario <name>         run only this scenario (repeatable, or comma-separated); default: the
                            suite's active scenarios plus ${ALWAYS_RUN.join(', ')}
  --results <dir>           where to keep checks.json files and logs (default results/conformance/<app>-<time>)
  --verbose                 stream the app's and the suite's own output`);
  process.exit(problem ? 2 : 0); // nothing has been started yet
}

function requirementsFile(revision) {
  return path.join(path.dirname(SUITE_PACKAGE), 'requirements', `${revision}.yaml`);
}

/** The suite's own YAML parser (one of its dependencies): its files are read the way it reads them. */
function parseYaml(text) {
  return createRequire(SUITE_PACKAGE)('yaml').parse(text);
}

/** What a revision scores, what it only runs (with the suite's reason), and what mcp-kit adds. */
function readRequirements(revision) {
  const doc = parseYaml(readFileSync(requirementsFile(revision), 'utf8'));
  const unscored = new Map((doc.not_scored ?? []).filter((e) => e.leg === 'server').map((e) => [e.scenario, e.reason]));
  const requiredByUs = (REQUIRED_BY_MCP_KIT[revision] ?? []).filter((s) => unscored.has(s));
  return { scored: doc.server ?? [], requiredByUs, unscored };
}

/** `server: [scenario | scenario:check-id]`, as the suite reads it. */
function readBaseline(file) {
  const doc = parseYaml(readFileSync(file, 'utf8')) ?? {};
  const entries = (doc.server ?? []).map((text) => {
    const [scenario, checkId] = String(text).split(':');
    return { text: String(text), scenario, checkId };
  });
  return { file, entries };
}

function readApp(dirName) {
  const file = path.join(ROOT, 'apps', dirName, 'package.json');
  if (!existsSync(file)) throw new Error(`no app at apps/${dirName}`);
  const pkg = JSON.parse(readFileSync(file, 'utf8'));
  if (!pkg.scripts?.start) throw new Error(`apps/${dirName} has no "start" script`);
  return { name: pkg.name, dir: path.dirname(file), start: pkg.scripts.start };
}

/** Asks the OS for a free port on 127.0.0.1. Another process could take it before the app binds;
 * startApp notices that only if the app then exits, which is why the app log is kept. */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, HOST, () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function startApp(app, port, logFile, verbose) {
  const log = createWriteStream(logFile);
  // The app's own "start" script, run as pnpm would (its bin directory first on the PATH), without
  // pnpm itself: npx resolving pnpm costs ~3.5 CPU-s per run, 8 runs in `npm test`.
  const bin = path.join(app.dir, 'node_modules', '.bin');
  const child = launch('/bin/sh', ['-c', app.start], {
    cwd: app.dir,
    env: { ...process.env, PATH: `${bin}${path.delimiter}${process.env.PATH ?? ''}`, PORT: String(port), HOST },
    onOutput: (chunk) => {
      log.write(chunk);
      if (verbose) process.stdout.write(chunk);
    },
  });
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`${app.name} exited (${child.exitCode ?? child.signalCode}) before listening:\n${tail(logFile)}`);
    }
    if (await canConnect(port)) return;
    await delay(200);
  }
  throw new Error(`${app.name} did not listen on ${HOST}:${port} within ${STARTUP_TIMEOUT_MS} ms:\n${tail(logFile)}`);
}

function canConnect(port) {
  return new Promise((resolve) => {
    const socket = net.connect({ host: HOST, port });
    socket.setTimeout(1_000);
    const done = (ok) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
    socket.once('timeout', () => done(false));
  });
}

// ---------------------------------------------------------------------------------------------
// Running the suite

/** The suite's CLI needs Node >= 22; borrow one through npx when this Node is older. */
function conformanceCli() {
  const require = createRequire(path.join(ROOT, 'package.json'));
  const entry = path.join(path.dirname(require.resolve('@modelcontextprotocol/conformance/package.json')), 'dist/index.js');
  const major = Number(process.versions.node.split('.')[0]);
  return major >= 22 ? [process.execPath, entry] : [node22(), entry];
}

/**
 * The path of a Node 22 binary from the npm package `node@22`: asked of npx once, then kept in
 * node_modules/.cache (npx costs ~2.7 CPU-s a call, twice per app in `npm test`).
 */
function node22() {
  const cache = path.join(ROOT, 'node_modules', '.cache', 'mcp-kit', 'node22-path');
  if (existsSync(cache)) {
    const known = readFileSync(cache, 'utf8').trim();
    if (known !== '' && existsSync(known)) return known;
  }
  const found = spawnSync('npx', ['-y', '-p', 'node@22', '--', 'node', '-p', 'process.execPath'], { cwd: ROOT, encoding: 'utf8' });
  const binary = found.stdout?.trim() ?? '';
  if (found.status !== 0 || !existsSync(binary)) throw new Error(`no Node 22 through npx (node@22): ${found.stderr ?? found.error}`);
  mkdirSync(path.dirname(cache), { recursive: true });
  writeFileSync(cache, `${binary}\n`);
  return binary;
}

async function runSuite(cli, serverArgs, logFile, verbose) {
  const log = createWriteStream(logFile, { flags: 'a' });
  let stdout = '';
  const child = launch(cli[0], [...cli.slice(1), 'server', '--timeout', String(SCENARIO_TIMEOUT_MS), ...serverArgs], {
    env: { ...process.env, NO_COLOR: '1' },
    onOutput: (chunk, stream) => {
      log.write(chunk);
      if (stream === 'stdout') stdout += chunk;
      if (verbose) process.stdout.write(chunk);
    },
  });
  const code = await waitForExit(child, SUITE_TIMEOUT_MS);
  await new Promise((resolve) => log.end(resolve));
  if (code === null) throw new Error(`the suite did not finish within ${SUITE_TIMEOUT_MS} ms; see ${logFile}`);
  return { code, stdout };
}

async function runOne(cli, url, scenario, resultsDir, verbose) {
  const out = path.join(resultsDir, 'scenarios');
  const logFile = path.join(resultsDir, `${scenario}.log`);
  try {
    await runSuite(cli, ['--url', url, '--scenario', scenario, '-o', out], logFile, verbose);
  } catch (error) {
    return [{ scenario, error: error instanceof Error ? error.message : String(error) }];
  }
  return collect([scenario], out, logFile);
}

/** Finds each scenario's checks.json under `out` (the suite names dirs server-<scenario>-<time>). */
function collect(scenarios, out, logFile) {
  const dirs = existsSync(out) ? readdirSync(out) : [];
  return scenarios.map((scenario) => {
    const matches = dirs.filter((d) => new RegExp(`^server-${escape(scenario)}-\\d{4}-\\d\\d-\\d\\dT[\\d-]+Z$`).test(d));
    if (matches.length === 0) {
      return { scenario, error: `no results: the scenario crashed, was skipped or is unknown (see ${logFile})` };
    }
    const dir = path.join(out, matches.sort().at(-1));
    return { scenario, checks: JSON.parse(readFileSync(path.join(dir, 'checks.json'), 'utf8')) };
  });
}

/**
 * A scenario's verdict from its checks. With a baseline (the suite's expected-failures file) a
 * WARNING is a deviation too, as the suite counts it; a deviation the baseline lists is expected,
 * and a listed one that no longer happens is a stale entry, which fails like a new deviation.
 */
function judge(run, baseline) {
  const counts = emptyCounts();
  if (run.error) return { scenario: run.scenario, ok: false, counts, expected: [], problems: [run.error] };
  const entries = baseline?.entries.filter((e) => e.scenario === run.scenario) ?? [];
  const wholeScenarioExpected = entries.some((e) => e.checkId === undefined);
  const expectedChecks = new Set(entries.filter((e) => e.checkId !== undefined).map((e) => e.checkId));
  const deviates = (check) =>
    check.status === 'FAILURE' || (check.status === 'WARNING' && (baseline !== undefined || NO_WARNINGS.has(run.scenario)));
  const problems = [];
  const expected = [];
  for (const check of run.checks) {
    if (check.status in counts) counts[check.status]++;
    if (!deviates(check)) continue;
    const line = `${check.id} ${check.status}: ${oneLine(check.errorMessage ?? check.description)}`;
    (wholeScenarioExpected || expectedChecks.has(check.id) ? expected : problems).push(line);
  }
  for (const id of MUST_SUCCEED[run.scenario] ?? []) {
    const check = run.checks.find((c) => c.id === id);
    if (!check) problems.push(`${id} is missing (must be SUCCESS)`);
    else if (check.status !== 'SUCCESS' && !deviates(check)) {
      const detail = check.errorMessage ?? check.details?.message ?? check.description;
      problems.push(`${id} ${check.status} (must be SUCCESS): ${oneLine(detail)}`);
    }
  }
  if (run.checks.length === 0) problems.push('the scenario reported no checks');
  if (wholeScenarioExpected && expected.length === 0) problems.push(`stale baseline entry ${run.scenario}: the scenario passes now`);
  for (const id of expectedChecks) {
    const mine = run.checks.filter((c) => c.id === id);
    if (mine.length > 0 && !mine.some(deviates)) problems.push(`stale baseline entry ${run.scenario}:${id}: the check passes now`);
  }
  // A scenario whose every check the suite itself skipped proved nothing either way: it neither
  // fails the run nor counts as passed, and its reason is printed.
  const skipped = run.checks.length > 0 && run.checks.every((c) => c.status === 'SKIPPED');
  const skipReason = skipped ? oneLine(run.checks[0].errorMessage ?? run.checks[0].description) : undefined;
  return { scenario: run.scenario, ok: problems.length === 0, skipped, skipReason, counts, expected, problems };
}

function emptyCounts() {
  return { SUCCESS: 0, WARNING: 0, FAILURE: 0, SKIPPED: 0 };
}

function printSummary(verdicts) {
  const width = Math.max(8, ...verdicts.map((v) => v.scenario.length));
  const row = (...cells) => console.log(cells.map((c, i) => (i === 0 ? c.padEnd(width) : c.padStart(7))).join('  '));
  console.log('');
  row('scenario', 'result', 'SUCCESS', 'WARNING', 'FAILURE', 'SKIPPED');
  row('-'.repeat(width), '------', '-------', '-------', '-------', '-------');
  for (const v of verdicts) {
    const c = v.counts;
    const result = !v.ok ? 'FAIL' : v.skipped ? 'skipped' : v.expected?.length ? 'xfail' : 'pass';
    row(v.scenario, result, ...[c.SUCCESS, c.WARNING, c.FAILURE, c.SKIPPED].map(String));
  }
  for (const v of verdicts.filter((v) => v.skipped)) console.log(`\n${v.scenario}: skipped by the suite itself: ${v.skipReason}`);
  for (const v of verdicts.filter((v) => v.problems.length > 0 || v.expected?.length > 0)) {
    console.log(`\n${v.scenario}:`);
    for (const problem of v.problems) console.log(`  - ${problem}`);
    for (const line of v.expected ?? []) console.log(`  ~ expected (baseline): ${line}`);
  }
}

/** Per revision: the scored table, what mcp-kit adds, then the unscored scenarios apart. */
function printRequirementsSummary(verdicts, revisions) {
  for (const revision of revisions) {
    const mine = verdicts.filter((v) => v.revision === revision);
    const scored = mine.filter((v) => v.kind === 'scored');
    const ours = mine.filter((v) => v.kind === 'mcp-kit');
    const unscored = mine.filter((v) => v.kind === 'unscored');
    console.log(`\n=== ${revision}: scored ${tally(scored)}; required by mcp-kit ${tally(ours)} ===`);
    printSummary([...scored, ...ours]);
    if (unscored.length > 0) {
      const passing = unscored.filter((v) => v.ok).length;
      console.log(`\nNot scored at ${revision} (reported, never fail the run): ${passing}/${unscored.length} pass`);
      for (const v of unscored) {
        const c = v.counts;
        const detail = v.problems.length > 0 && c.SUCCESS + c.FAILURE === 0 ? `: ${v.problems[0]}` : '';
        console.log(`  ${v.ok ? '✓' : '✗'} ${v.scenario} (${v.unscoredReason}): ${c.SUCCESS} passed, ${c.FAILURE} failed${detail}`);
      }
    }
  }
}

function tally(verdicts) {
  const passed = verdicts.filter((v) => v.ok && !v.skipped).length;
  const skipped = verdicts.filter((v) => v.ok && v.skipped).length;
  const xfail = verdicts.filter((v) => v.ok && v.expected?.length > 0).length;
  const ran = verdicts.length - skipped;
  return `${passed}/${ran} passed${skipped > 0 ? `, ${skipped} skipped by the suite` : ''}${xfail > 0 ? ` (${xfail} with expected failures)` : ''}`;
}

// ---------------------------------------------------------------------------------------------
// Processes: every child leads its own process group, so stopping the group also stops what it
// spawned (sh -> node). Only groups this script created are ever signalled, and
// only while they still have members: a group id cannot be reused while any member is alive.

/** Leaders (pids) of the process groups this script started and has not seen empty yet. */
const groups = new Set();

function launch(command, args, { env, onOutput, cwd = ROOT }) {
  const child = spawn(command, args, { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  if (child.pid !== undefined) groups.add(child.pid);
  child.once('exit', () => {
    if (!groupAlive(child.pid)) groups.delete(child.pid);
  });
  child.stdout.setEncoding('utf8').on('data', (chunk) => onOutput(chunk, 'stdout'));
  child.stderr.setEncoding('utf8').on('data', (chunk) => onOutput(chunk, 'stderr'));
  child.once('error', (error) => onOutput(`spawn failed: ${error.message}\n`, 'stderr'));
  return child;
}

/** Resolves with the exit code, or null after stopping the child's group when it overran. */
function waitForExit(child, timeoutMs) {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      void stopGroups([child.pid]);
      resolve(null);
    }, timeoutMs);
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve(code ?? (signal ? 128 : 1));
    });
  });
}

function groupAlive(pid) {
  if (pid === undefined) return false;
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

function signalGroup(pid, signal) {
  try {
    process.kill(-pid, signal);
  } catch {
    // Already gone.
  }
}

/** SIGTERM to each group, then SIGKILL to whatever is left after STOP_GRACE_MS. */
async function stopGroups(pids) {
  const live = pids.filter(groupAlive);
  for (const pid of live) signalGroup(pid, 'SIGTERM');
  const deadline = Date.now() + STOP_GRACE_MS;
  while (live.some(groupAlive) && Date.now() < deadline) await delay(100);
  for (const pid of live.filter(groupAlive)) signalGroup(pid, 'SIGKILL');
  for (const pid of pids) if (!groupAlive(pid)) groups.delete(pid);
}

let exiting = false;
function exit(code) {
  if (exiting) return;
  exiting = true;
  stopGroups([...groups]).finally(() => process.exit(code));
}

// ---------------------------------------------------------------------------------------------

function delay(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function stamp() {
  return new Date().toISOString().replace(/[:.]/g, '-');
}

function escape(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function oneLine(text) {
  const flat = String(text).replace(/\s+/g, ' ').trim();
  return flat.length > 200 ? `${flat.slice(0, 197)}...` : flat;
}

function tail(file, lines = 30) {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

main().then(
  (code) => exit(code),
  (error) => {
    console.error(`conformance: ${error instanceof Error ? error.message : String(error)}`);
    exit(2);
  },
);
