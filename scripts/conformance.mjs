#!/usr/bin/env node
// Runs the official MCP conformance suite (server side) against one example app.
//
//   node scripts/conformance.mjs <app> [--scenario <name>]... [--results <dir>] [--verbose]
//
// <app> is a workspace app under apps/ (e.g. express-example). The script starts it with
// `PORT=<free port> HOST=127.0.0.1 pnpm --filter <app> start`, waits for the port, runs the
// suite's default ("active") server scenarios plus the ones listed in ALWAYS_RUN, prints a summary
// and stops the app. Exit code: 0 = conformant, 1 = a scenario failed, 2 = could not run.
//
// `--url <http://127.0.0.1:port/mcp>` (undocumented on purpose) skips starting an app and tests a
// server that is already running, e.g. a baseline built on the SDK's own transport.

import { spawn } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PNPM = ['npx', '-y', 'pnpm@10.34.9'];
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

const STARTUP_TIMEOUT_MS = 90_000; // pnpm via npx plus a cold `next start`
const SCENARIO_TIMEOUT_MS = 30_000; // the suite's own per-scenario limit
const SUITE_TIMEOUT_MS = 15 * 60_000; // includes a first-time download of node@22
const STOP_GRACE_MS = 5_000;

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const app = args.app === undefined ? undefined : readApp(args.app);
  const label = args.url ? new URL(args.url).host.replace(/[^\w.-]/g, '_') : args.app;
  const resultsDir = path.resolve(args.results ?? path.join(ROOT, 'results', 'conformance', `${label}-${stamp()}`));
  mkdirSync(resultsDir, { recursive: true });

  // Children run in their own process groups, so a Ctrl-C reaches only this script: stop them here.
  process.on('SIGINT', () => exit(130));
  process.on('SIGTERM', () => exit(143));

  let url = args.url;
  if (app) {
    const port = await freePort();
    url = `http://${HOST}:${port}/mcp`;
    console.log(`Starting ${app.name} on ${HOST}:${port} (log: ${path.relative(ROOT, path.join(resultsDir, 'app.log'))})`);
    await startApp(app, port, path.join(resultsDir, 'app.log'), args.verbose);
  }

  const cli = conformanceCli();
  const runs = []; // { scenario, checks } or { scenario, error }
  if (args.scenarios.length === 0) {
    console.log(`Running the default (active) server suite against ${url}`);
    const out = path.join(resultsDir, 'suite');
    const logFile = path.join(resultsDir, 'suite.log');
    const { code, stdout } = await runSuite(cli, ['--url', url, '-o', out], logFile, args.verbose);
    const attempted = [...stdout.matchAll(/^=== Running scenario: (\S+) ===$/gm)].map((m) => m[1]);
    if (attempted.length === 0) throw new Error(`the suite ran no scenarios (exit ${code}); see ${logFile}`);
    runs.push(...collect(attempted, out, logFile));
    const extra = ALWAYS_RUN.filter((s) => !attempted.includes(s));
    console.log(`Suite ran ${attempted.length} scenarios; running ${extra.join(', ') || 'nothing'} explicitly`);
    for (const scenario of extra) runs.push(...(await runOne(cli, url, scenario, resultsDir, args.verbose)));
    if (code !== 0 && runs.every((r) => judge(r).ok)) {
      runs.push({ scenario: '(suite exit code)', error: `suite exited ${code} but no failing check was found` });
    }
  } else {
    for (const scenario of args.scenarios) runs.push(...(await runOne(cli, url, scenario, resultsDir, args.verbose)));
  }

  const verdicts = runs.map(judge);
  printSummary(verdicts);
  writeFileSync(path.join(resultsDir, 'summary.json'), JSON.stringify({ url, verdicts }, null, 2));
  const failed = verdicts.filter((v) => !v.ok);
  console.log(
    `\n${failed.length === 0 ? 'PASS' : 'FAIL'}: ${verdicts.length - failed.length}/${verdicts.length} scenarios passed` +
      ` (results: ${path.relative(process.cwd(), resultsDir) || '.'})`,
  );
  return failed.length === 0 ? 0 : 1;
}

// ---------------------------------------------------------------------------------------------
// Arguments and the app under test

function parseArgs(argv) {
  const args = { app: undefined, url: undefined, scenarios: [], results: undefined, verbose: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const value = () => {
      const next = argv[++i];
      if (next === undefined || next.startsWith('--')) usage(`${arg} needs a value`);
      return next;
    };
    if (arg === '--scenario') args.scenarios.push(...value().split(','));
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
  return args;
}

function usage(problem) {
  if (problem) console.error(`conformance: ${problem}\n`);
  console.error(`Usage: node scripts/conformance.mjs <app> [--scenario <name>]... [--results <dir>] [--verbose]

  <app>              workspace app under apps/ (its \`start\` script must honour PORT and HOST)
  --scenario <name>  run only this scenario (repeatable, or comma-separated); default: the
                     suite's active scenarios plus ${ALWAYS_RUN.join(', ')}
  --results <dir>    where to keep checks.json files and logs (default results/conformance/<app>-<time>)
  --verbose          stream the app's and the suite's own output`);
  process.exit(problem ? 2 : 0); // nothing has been started yet
}

function readApp(dirName) {
  const file = path.join(ROOT, 'apps', dirName, 'package.json');
  if (!existsSync(file)) throw new Error(`no app at apps/${dirName}`);
  const pkg = JSON.parse(readFileSync(file, 'utf8'));
  if (!pkg.scripts?.start) throw new Error(`apps/${dirName} has no "start" script`);
  return { name: pkg.name, dir: path.dirname(file) };
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
  const child = launch(PNPM[0], [...PNPM.slice(1), '--filter', app.name, 'start'], {
    env: { ...process.env, PORT: String(port), HOST },
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
  return major >= 22 ? [process.execPath, entry] : ['npx', '-y', '-p', 'node@22', '--', 'node', entry];
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

function judge(run) {
  const counts = { SUCCESS: 0, WARNING: 0, FAILURE: 0, SKIPPED: 0 };
  if (run.error) return { scenario: run.scenario, ok: false, counts, problems: [run.error] };
  const failing = (check) => check.status === 'FAILURE' || (check.status === 'WARNING' && NO_WARNINGS.has(run.scenario));
  const problems = [];
  for (const check of run.checks) {
    if (check.status in counts) counts[check.status]++;
    if (failing(check)) problems.push(`${check.id} ${check.status}: ${oneLine(check.errorMessage ?? check.description)}`);
  }
  for (const id of MUST_SUCCEED[run.scenario] ?? []) {
    const check = run.checks.find((c) => c.id === id);
    if (!check) problems.push(`${id} is missing (must be SUCCESS)`);
    else if (check.status !== 'SUCCESS' && !failing(check)) {
      const detail = check.errorMessage ?? check.details?.message ?? check.description;
      problems.push(`${id} ${check.status} (must be SUCCESS): ${oneLine(detail)}`);
    }
  }
  if (run.checks.length === 0) problems.push('the scenario reported no checks');
  return { scenario: run.scenario, ok: problems.length === 0, counts, problems };
}

function printSummary(verdicts) {
  const width = Math.max(8, ...verdicts.map((v) => v.scenario.length));
  const row = (...cells) => console.log(cells.map((c, i) => (i === 0 ? c.padEnd(width) : c.padStart(7))).join('  '));
  console.log('');
  row('scenario', 'result', 'SUCCESS', 'WARNING', 'FAILURE', 'SKIPPED');
  row('-'.repeat(width), '------', '-------', '-------', '-------', '-------');
  for (const v of verdicts) {
    const c = v.counts;
    row(v.scenario, v.ok ? 'pass' : 'FAIL', ...[c.SUCCESS, c.WARNING, c.FAILURE, c.SKIPPED].map(String));
  }
  for (const v of verdicts.filter((v) => v.problems.length > 0)) {
    console.log(`\n${v.scenario}:`);
    for (const problem of v.problems) console.log(`  - ${problem}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Processes: every child leads its own process group, so stopping the group also stops what it
// spawned (npx -> pnpm -> sh -> node). Only groups this script created are ever signalled, and
// only while they still have members: a group id cannot be reused while any member is alive.

/** Leaders (pids) of the process groups this script started and has not seen empty yet. */
const groups = new Set();

function launch(command, args, { env, onOutput }) {
  const child = spawn(command, args, { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
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
