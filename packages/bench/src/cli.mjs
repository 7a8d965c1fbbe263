#!/usr/bin/env node
// `pnpm bench [--short] [--servers=a,b] [--workloads=x,y] [--no-next] [--no-docs] [--cpu-prof]`
//
// Starts every server in its own process, one at a time, drives it from this process with raw
// Streamable HTTP (the SDK client only for the polling workload), prints the tables, writes the
// raw numbers to results/bench-*.json and, after a full run, docs/benchmarks.md.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { hostCpu, loadOver, machine } from './machine.mjs';
import { mcpServerHeapBytes } from './reference.mjs';
import { renderMarkdown, renderTables } from './report.mjs';
import { BENCH_ROOT, NEXT_DIR, SERVERS, nextBuilt, serves, startServer } from './servers/spawn.mjs';
import { burst } from './workloads/burst.mjs';
import { memory } from './workloads/memory.mjs';
import { modern } from './workloads/modern.mjs';
import { polling } from './workloads/polling.mjs';
import { resume } from './workloads/resume.mjs';
import { throughput } from './workloads/throughput.mjs';
import { describeFailures, judgeFailures } from './verdict.mjs';

const REPO_ROOT = join(BENCH_ROOT, '..', '..');

const FULL = {
  // rounds: every server once per round, rounds one after the other; the median round counts. One
  // 10 s window of the SDK swings by ±20% from run to run on this machine.
  throughput: { sessions: 16, inFlight: 64, warmupMs: 3_000, durationMs: 10_000, rounds: 3 },
  // One burst takes ~50 ms: many runs, so the median holds still.
  burst: { events: 20_000, reps: 15, warmups: 3 },
  resume: { sizes: [10_000, 100_000, 1_000_000], samples: 50, warmups: 5, budgetMs: 30_000, minSamples: 3 },
  // settleMs: V8 hands freed heap pages back only after some idle seconds; read RSS after that.
  memory: { sessions: 1_000, streams: 10_000, settleMs: 10_000 },
  polling: { clients: 16, steps: 2_000, intervalMs: 1, closeEvery: 1, retryMs: 0, stallMs: 60_000 },
  modern: { inFlight: 64, warmupMs: 3_000, durationMs: 10_000, rounds: 3 },
};

/**
 * Every code path once, in about a minute: for CI, which checks that the benchmark runs, never a
 * timing. Every workload runs against mcp-kit's Express server (`SHORT_EVERY_WORKLOAD`); every
 * other server (Koa, Next, the variants with `only`, the anchors: SDK transports, bare servers,
 * floors) runs only the first workload it serves, which shows it starts and answers. A workload
 * drives each server through the same bench route, so running Koa and Next through all of them
 * again would only repeat the Express runs' code paths; their numbers would be ratios, and short
 * mode has none worth reading.
 * An anchor's failed workload does not fail it (verdict.mjs). The durations are the least that
 * still warms a server up and sends every kind of request.
 */
const SHORT_EVERY_WORKLOAD = 'kit-express';
const SHORT = {
  throughput: { sessions: 16, inFlight: 64, warmupMs: 100, durationMs: 250, rounds: 1 },
  burst: { events: 1_000, reps: 1, warmups: 1 },
  resume: { sizes: [10_000], samples: 5, warmups: 1, budgetMs: 5_000, minSamples: 3 },
  memory: { sessions: 50, streams: 100, settleMs: 0 },
  polling: { clients: 4, steps: 100, intervalMs: 1, closeEvery: 1, retryMs: 0, stallMs: 15_000 },
  modern: { inFlight: 64, warmupMs: 100, durationMs: 250, rounds: 1 },
};

/** Each workload gets fresh server processes started with these settings (see servers/tools.mjs). */
const WORKLOADS = [
  {
    name: 'throughput',
    env: {},
    floors: true,
    rounds: (c) => c.throughput.rounds,
    median: 'callsPerSec',
    run: (h, c) => throughput(h, c.throughput),
  },
  {
    name: 'json',
    env: { BENCH_JSON: '1' },
    floors: true,
    rounds: (c) => c.throughput.rounds,
    median: 'callsPerSec',
    run: (h, c) => throughput(h, c.throughput),
  },
  { name: 'burst', env: {}, floors: true, run: (h, c) => burst(h, c.burst) },
  // Room for 1M ~150-byte frames: the memory store's default maxBytes (64 MiB) would evict them.
  { name: 'resume', env: { BENCH_STORE_MAX_BYTES: String(4 * 1024 ** 3) }, run: (h, c) => resume(h, c.resume) },
  { name: 'memory', env: {}, floors: true, run: (h, c) => memory(h, c.memory) },
  // The client comes back right away, so the run measures how fast the server cycles resumes.
  { name: 'polling', env: { BENCH_RETRY_MS: '0' }, run: (h, c) => polling(h, c.polling) },
  // 2026-07-28 clients: no sessions; only servers that serve the modern era take part.
  {
    name: 'modern',
    era: 'modern',
    env: {},
    floors: true,
    rounds: (c) => c.modern.rounds,
    median: 'callsPerSec',
    run: (h, c) => modern(h, c.modern),
  },
];

function parseArgs(argv) {
  const args = { short: false, docs: true, next: true, cpuProf: false, servers: undefined, workloads: undefined };
  for (const a of argv) {
    if (a === '--short') args.short = true;
    else if (a === '--no-docs') args.docs = false;
    // Without the servers on `next start`, and so without building the bench's Next app (what
    // npm test runs: that build is a minute of CPU on two cores; next-example's tests and
    // conformance runs cover the Next adapter).
    else if (a === '--no-next') args.next = false;
    else if (a === '--cpu-prof') args.cpuProf = true;
    else if (a.startsWith('--servers=')) args.servers = a.slice(10).split(',');
    else if (a.startsWith('--workloads=')) args.workloads = a.slice(12).split(',');
    else if (a === '--') continue;
    else throw new Error(`unknown argument ${a}; use --short, --servers=a,b, --workloads=x,y, --no-next, --no-docs, --cpu-prof`);
  }
  return args;
}

/** Rebuilds the bench's Next app when it is missing or older than its sources or the packages. */
function ensureNextBuild() {
  const newest = (dir) => {
    let t = 0;
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.name === 'node_modules' || entry.name === '.next') continue;
      const p = join(dir, entry.name);
      t = Math.max(t, entry.isDirectory() ? newest(p) : statSync(p).mtimeMs);
    }
    return t;
  };
  const sources = Math.max(
    newest(join(BENCH_ROOT, 'src', 'servers')),
    ...['core', 'next', 'fixtures'].map((p) => newest(join(REPO_ROOT, 'packages', p, 'dist'))),
  );
  if (nextBuilt() && statSync(join(NEXT_DIR, '.next', 'BUILD_ID')).mtimeMs > sources) return;
  console.log('building the bench Next app (next build) ...');
  const nextBin = join(BENCH_ROOT, 'node_modules', 'next', 'dist', 'bin', 'next');
  const r = spawnSync(process.execPath, [nextBin, 'build'], {
    cwd: NEXT_DIR,
    stdio: 'inherit',
    env: { ...process.env, NEXT_TELEMETRY_DISABLED: '1' },
  });
  if (r.status !== 0) throw new Error('next build of the bench app failed; run `npx -y pnpm@10.34.9 build` first');
}

/**
 * One result per server: the only one, or the round with the median `key` (an odd number of
 * rounds), carrying every round's `key` in `rounds`. A failed round fails the server.
 */
function medianRound(results, key) {
  if (results.length === 1) return results[0];
  const failed = results.find((r) => r.error);
  if (failed) return failed;
  const sorted = [...results].sort((a, b) => a[key] - b[key]);
  return { ...sorted[(sorted.length - 1) >> 1], rounds: results.map((r) => r[key]) };
}

function processCpuSeconds(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const config = args.short ? SHORT : FULL;
  const servers = SERVERS.filter((s) => (!args.servers || args.servers.includes(s.name)) && (args.next || !s.next));
  const workloads = WORKLOADS.filter((w) => !args.workloads || args.workloads.includes(w.name));
  if (servers.some((s) => s.next)) ensureNextBuild();
  const profileDir = join(REPO_ROOT, 'results', 'profiles');
  if (args.cpuProf) mkdirSync(profileDir, { recursive: true });

  const run = {
    command: `pnpm bench${process.argv.slice(2).length ? ` ${process.argv.slice(2).join(' ')}` : ''}`,
    mode: args.short ? 'short' : 'full',
    startedAt: new Date().toISOString(),
    machine: machine(),
    config,
    load: {},
    results: {},
  };
  console.log(
    `mcp-kit bench (${run.mode}): ${servers.map((s) => s.name).join(', ')}; node ${process.version}, ${run.machine.nproc} cores, load average ${os
      .loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}`,
  );
  // Short mode: the one workload each server but SHORT_EVERY_WORKLOAD runs (see SHORT).
  const firstWorkload = new Map();
  for (const server of servers)
    if (server.name !== SHORT_EVERY_WORKLOAD) firstWorkload.set(server.name, workloads.find((w) => serves(server, w))?.name);
  const takesPart = (server, workload) =>
    serves(server, workload) && (!args.short || !firstWorkload.has(server.name) || firstWorkload.get(server.name) === workload.name);
  const runHost = hostCpu();
  let runOwn = 0;
  for (const workload of workloads) {
    const before = hostCpu();
    const clientBefore = process.cpuUsage();
    let serverCpu = 0;
    run.results[workload.name] = {};
    const rounds = workload.rounds?.(config) ?? 1;
    const byRound = {};
    for (let round = 1; round <= rounds; round++)
      for (const server of servers) {
        if (!takesPart(server, workload)) continue;
        const env = { ...workload.env };
        if (args.cpuProf)
          env.NODE_FLAGS = [
            '--cpu-prof',
            `--cpu-prof-dir=${profileDir}`,
            `--cpu-prof-name=${workload.name}-${server.name}-${Date.now()}.cpuprofile`,
          ];
        process.stdout.write(`  ${workload.name.padEnd(10)} ${server.name.padEnd(22)}${rounds > 1 ? ` (round ${round}/${rounds})` : ''} `);
        const started = Date.now();
        let handle;
        try {
          handle = await startServer(server, env);
          const result = await workload.run(handle, config);
          (byRound[server.name] ??= []).push(result);
          process.stdout.write(`done in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
        } catch (error) {
          (byRound[server.name] ??= []).push({ error: String(error?.stack ?? error), phase: handle ? 'workload' : 'start' });
          process.stdout.write(`FAILED: ${String(error?.message ?? error).split('\n')[0]}\n`);
          if (handle) console.error(handle.output().slice(-2_000));
        } finally {
          if (handle) {
            serverCpu += processCpuSeconds(handle.pid);
            await handle.stop();
          }
        }
      }
    for (const [name, results] of Object.entries(byRound)) run.results[workload.name][name] = medianRound(results, workload.median);
    const client = process.cpuUsage(clientBefore);
    const own = serverCpu + (client.user + client.system) / 1e6;
    runOwn += own;
    run.load[workload.name] = loadOver(before, hostCpu(), own);
  }
  run.load.total = loadOver(runHost, hostCpu(), runOwn);
  // What one McpServer costs (500 built per SDK, ~2 CPU-s): for the full run's memory table only.
  if (!args.short)
    run.reference = { mcpServerHeapBytes: await mcpServerHeapBytes('v1'), mcpServerV2HeapBytes: await mcpServerHeapBytes('v2') };
  run.finishedAt = new Date().toISOString();

  const tables = renderTables(run);
  console.log(`\n${tables}`);
  const resultsDir = join(REPO_ROOT, 'results');
  mkdirSync(resultsDir, { recursive: true });
  const file = join(resultsDir, `bench-${run.startedAt.replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, `${JSON.stringify(run, null, 2)}\n`);
  console.log(`raw results: ${file}`);
  const failures = judgeFailures(run.results, { short: args.short, servers });
  const anyFailed = failures.fatal.length + failures.reported.length > 0;
  if (!args.short && args.docs && args.next && !args.servers && !args.workloads && !anyFailed) {
    mkdirSync(join(REPO_ROOT, 'docs'), { recursive: true });
    const page = join(REPO_ROOT, 'docs', 'benchmarks.md');
    writeFileSync(page, `${renderMarkdown(run)}${keptSections(page)}`);
    console.log('wrote docs/benchmarks.md');
  }
  for (const line of describeFailures(failures)) console.error(line);
  if (failures.fatal.length > 0) process.exitCode = 1;
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});

/** Where docs/benchmarks.md's sections written from other benchmarks (`pnpm bench:scale`) start: this run keeps them. */
const KEPT_MARKER = '<!-- kept by pnpm bench:';

/** What follows {@link KEPT_MARKER} in the page as it is, with a blank line before it; `''` when there is none. */
function keptSections(page) {
  const text = existsSync(page) ? readFileSync(page, 'utf8') : '';
  const at = text.indexOf(KEPT_MARKER);
  return at < 0 ? '' : `\n${text.slice(at)}`;
}
