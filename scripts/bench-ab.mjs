#!/usr/bin/env node
// Interleaved A/B benchmark of two revisions on this machine:
//   pnpm bench:ab -- --base <rev> [--head <rev>] [--rounds 5] [--short] [--keep]
// (--short: every run a fraction of a second, to check the script, never to read its figures;
// --keep: leave the worktrees for another look.)
//
// Builds each revision in a git worktree under a temp dir (A: --base, B: --head, default HEAD;
// committed code only, so what others have in this work tree does not leak into B), then runs A
// and B alternately, A B A B … for `rounds` rounds, for each workload: tools/call throughput and
// one burst of log events (packages/bench's workloads and client), each with the memory store and
// with @mcp-kit/redis on a redis-server of its own. Each run is a fresh server process
// (scripts/bench-ab-server.mjs, the same file on both sides). Prints per workload the median of
// B/A over the rounds, their spread, and a verdict.
//
// Each workload is compared twice: by its rate (calls/s, events/s: what a client sees, which other
// processes on the machine also move) and by the server's CPU time per call or per event (what the
// server process spent, read from /proc through /bench/stats: steadier on a shared machine).
//
// Noise: how far two runs of the same build land apart in this run. For each workload, the ratios
// of consecutive runs of A (A2/A1, A3/A2, …) and of B, each taken as max(r, 1/r) − 1: the noise
// band is their median, the typical gap between two runs of one build (the largest would let one
// stalled run on a shared machine call anything noise). B differs from A beyond noise when the
// median of B/A, taken the same way, lies outside that band.
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { hostCpu, loadOver } from '../packages/bench/src/machine.mjs';
import { McpHttp } from '../packages/bench/src/client/mcp.mjs';
import { freePort } from '../packages/bench/src/servers/spawn.mjs';
import { burst } from '../packages/bench/src/workloads/burst.mjs';
import { throughput } from '../packages/bench/src/workloads/throughput.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const PNPM = ['-y', 'pnpm@10.34.9'];

/** The workloads, each run with and without Redis; `value` is what is compared (higher is better). */
const WORKLOADS = [
  {
    name: 'tools/call',
    unit: 'calls/s',
    run: (h, _redis, short) =>
      throughput(h, { sessions: 16, inFlight: 64, warmupMs: short ? 200 : 2_000, durationMs: short ? 500 : 5_000 }),
    value: (r) => r.callsPerSec,
    cpu: (r) => r.serverCpuUsPerCall,
    cpuUnit: 'µs/call',
  },
  {
    name: 'burst',
    unit: 'events/s',
    // Through Redis each event is an XADD before it is written: fewer events keep a run near 1 s.
    run: (h, redis, short) =>
      burst(
        h,
        short
          ? { events: 1_000, reps: 2, warmups: 1 }
          : redis
            ? { events: 5_000, reps: 7, warmups: 2 }
            : { events: 20_000, reps: 9, warmups: 2 },
      ),
    value: (r) => r.eventsPerSec,
    cpu: (r) => r.serverCpuUsPerEvent,
    cpuUnit: 'µs/event',
  },
];

function parseArgs(argv) {
  const args = { base: undefined, head: 'HEAD', rounds: 5, keep: false, short: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') continue;
    else if (a === '--base') args.base = argv[++i];
    else if (a === '--head') args.head = argv[++i];
    else if (a === '--rounds') args.rounds = Number(argv[++i]);
    else if (a === '--keep') args.keep = true;
    else if (a === '--short') args.short = true;
    else throw new Error(`unknown argument ${a}; use --base <rev> [--head <rev>] [--rounds N] [--short] [--keep]`);
  }
  if (!args.base) throw new Error('--base <rev> is required, e.g. pnpm bench:ab -- --base main~5');
  if (!(args.rounds >= 2)) throw new Error('--rounds must be at least 2: the noise band compares consecutive runs');
  return args;
}

function must(cmd, argv, cwd) {
  const r = spawnSync(cmd, argv, {
    cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
    encoding: 'utf8',
    env: { ...process.env, TURBO_TELEMETRY_DISABLED: '1' },
  });
  if (r.status !== 0) throw new Error(`${cmd} ${argv.join(' ')} (in ${cwd}) failed:\n${r.stdout}\n${r.stderr}`);
  return r.stdout.trim();
}

/** A worktree of `rev` at `dir`, installed from the lockfile and with what the A/B server loads built. */
function prepare(rev, dir) {
  const commit = must('git', ['rev-parse', '--verify', `${rev}^{commit}`], root);
  must('git', ['worktree', 'add', '--detach', dir, commit], root);
  // --prefer-offline: the pnpm store on this machine has what the lockfiles name; anything else is fetched.
  must('npx', [...PNPM, 'install', '--frozen-lockfile', '--prefer-offline'], dir);
  must(
    'npx',
    [...PNPM, 'exec', 'turbo', 'run', 'build', '--filter=@mcp-kit/express', '--filter=@mcp-kit/redis', '--filter=@mcp-kit/fixtures'],
    dir,
  );
  copyFileSync(join(root, 'scripts', 'bench-ab-server.mjs'), join(dir, 'packages', 'bench', 'src', 'servers', 'ab-server.mjs'));
  return { rev, commit, dir, subject: must('git', ['log', '-1', '--format=%h %s', commit], root) };
}

/** Starts the A/B server of `side`; resolves once /bench/stats answers. Stopped by its PID. */
async function startServer(side, env) {
  const port = await freePort();
  const child = spawn(process.execPath, [join(side.dir, 'packages', 'bench', 'src', 'servers', 'ab-server.mjs')], {
    cwd: join(side.dir, 'packages', 'bench'),
    env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1', NODE_ENV: 'production' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  child.stdout.on('data', (d) => (log = (log + d).slice(-5_000)));
  child.stderr.on('data', (d) => (log = (log + d).slice(-5_000)));
  let exited = false;
  const exit = new Promise((resolve) => child.once('exit', () => resolve((exited = true))));
  const origin = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (exited) throw new Error(`the server of ${side.rev} exited before it was ready:\n${log}`);
    const up = await fetch(`${origin}/bench/stats`).then(
      (r) => r.ok,
      () => false,
    );
    if (up) break;
    if (Date.now() > deadline) {
      process.kill(child.pid, 'SIGKILL');
      throw new Error(`the server of ${side.rev} did not answer in time:\n${log}`);
    }
    await sleep(100);
  }
  return {
    pid: child.pid,
    origin,
    path: '/mcp',
    async stop() {
      if (exited) return;
      process.kill(child.pid, 'SIGTERM');
      const timer = setTimeout(() => exited || process.kill(child.pid, 'SIGKILL'), 3_000);
      await exit;
      clearTimeout(timer);
    },
  };
}

/** One command over RESP on a connection of its own; resolves with the reply's text (a status or a bulk string). */
function redisCommand(url, ...args) {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    let reply = Buffer.alloc(0);
    const socket = connect(Number(port), hostname, () =>
      socket.write(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`),
    );
    socket.on('data', (d) => {
      reply = Buffer.concat([reply, d]);
      const head = reply.indexOf('\r\n');
      if (head < 0) return;
      const kind = String.fromCharCode(reply[0]);
      if (kind === '$') {
        const length = Number(reply.subarray(1, head).toString());
        if (reply.length < head + 2 + length + 2) return;
        socket.end();
        resolve(reply.subarray(head + 2, head + 2 + length).toString());
      } else {
        socket.end();
        if (kind === '+') resolve(reply.subarray(1, head).toString());
        else reject(new Error(`${args[0]}: ${reply.subarray(0, head)}`));
      }
    });
    socket.once('error', reject);
  });
}

/** FLUSHALL, so each run starts on an empty Redis and the streams of the last do not pile up. */
const flushRedis = (url) => redisCommand(url, 'FLUSHALL');

/** The commands Redis has run (those of scripts included), by name, from INFO commandstats. */
async function commandsRun(url) {
  const by = {};
  for (const [, name, calls] of (await redisCommand(url, 'INFO', 'commandstats')).matchAll(/^cmdstat_(\S+?):calls=(\d+)/gm))
    by[name] = Number(calls);
  return by;
}

/** Commands per unit between two readings, by name; the reading's own INFO left out. */
function perUnit(before, after, units) {
  const out = {};
  for (const [name, n] of Object.entries(after)) {
    const d = n - (before[name] ?? 0) - (name === 'info' ? 1 : 0);
    if (d > 0) out[name] = d / units;
  }
  return out;
}

const total = (by) => Object.values(by).reduce((a, b) => a + b, 0);

/** `B − A` of two per-unit breakdowns, the commands that differ by at least 0.05 a unit. */
function difference(a, b) {
  const names = new Set([...Object.keys(a), ...Object.keys(b)]);
  const out = [];
  for (const name of names) {
    const d = (b[name] ?? 0) - (a[name] ?? 0);
    if (Math.abs(d) >= 0.05) out.push(`${d > 0 ? '+' : ''}${d.toFixed(2)} ${name.toUpperCase()}`);
  }
  return out.length > 0 ? out.join(', ') : 'none';
}

const CALLS_COUNTED = 200;
const EVENTS_COUNTED = 2_000;

/**
 * The Redis commands one tools/call and one burst event cost a side's server: counts, not timings,
 * so they hold on a busy machine. Calls one after the other on one session, after one untimed
 * call; the count includes the server's heartbeats meanwhile (a few commands a second).
 */
async function redisCommandsOf(side, url) {
  await flushRedis(url);
  const handle = await startServer(side, { BENCH_REDIS_URL: url });
  const client = new McpHttp(handle.origin, { connections: 2, path: handle.path });
  try {
    const session = await client.initialize();
    await client.callTool(session, 'test_simple_text', {});
    // Each count takes an INFO, which commandstats counts too.
    let before = await commandsRun(url);
    for (let i = 0; i < CALLS_COUNTED; i++) await client.callTool(session, 'test_simple_text', {});
    const perCall = perUnit(before, await commandsRun(url), CALLS_COUNTED);
    before = await commandsRun(url);
    await client.callTool(session, 'bench_burst', { count: EVENTS_COUNTED });
    const perEvent = perUnit(before, await commandsRun(url), EVENTS_COUNTED);
    return { perCall, perEvent };
  } finally {
    await client.close();
    await handle.stop();
  }
}

/** A redis-server on a free loopback port, without persistence (bench-support.mjs's needs a built core). */
async function startRedis() {
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  child.once('error', (e) => {
    console.error(`redis-server could not start (${e.message}); install it: apt-get install -y redis-server`);
    process.exit(1);
  });
  return { url: `redis://127.0.0.1:${port}`, child };
}

/** CPU seconds a process has used (user + system), read before it is stopped. */
function processCpuSeconds(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

/** The middle value; the mean of the two middle ones for an even count. */
function median(values) {
  const s = [...values].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** How far a ratio is from 1, the same whichever way: 0.8 and 1.25 are both 0.25. */
const apart = (ratio) => Math.max(ratio, 1 / ratio) - 1;

/** How far each run of one build landed from the one before it. */
const gaps = (values) => values.slice(1).map((v, i) => apart(v / values[i]));

/** One table row: A and B's medians, B/A (median, then each round's range), the noise band, the verdict. */
function compare(name, A, B, unit, higherIsBetter) {
  const ratios = A.map((a, i) => B[i] / a);
  const ratio = median(ratios);
  // The typical gap between two runs of the same build, A's and B's together.
  const band = median([...gaps(A), ...gaps(B)]);
  const within = apart(ratio) <= band;
  const better = higherIsBetter ? ratio > 1 : ratio < 1;
  const digits = unit.startsWith('µs') ? 1 : 0;
  return {
    within,
    row: `| ${name} | ${median(A).toFixed(digits)} ${unit} | ${median(B).toFixed(digits)} ${unit} | ${ratio.toFixed(3)} | ${Math.min(...ratios).toFixed(3)} … ${Math.max(...ratios).toFixed(3)} | ±${(band * 100).toFixed(1)}% | ${within ? 'within noise' : `B ${better ? 'better' : 'worse'} by ${(apart(ratio) * 100).toFixed(1)}%, beyond noise`} |`,
  };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const tmp = mkdtempSync(join(os.tmpdir(), 'mcp-kit-ab-'));
  const worktrees = [];
  const redis = await startRedis();
  const cleanUp = () => {
    process.kill(redis.child.pid, 'SIGKILL');
    if (args.keep) return console.log(`worktrees kept under ${tmp} (remove with git worktree remove)`);
    for (const dir of worktrees) spawnSync('git', ['worktree', 'remove', '--force', dir], { cwd: root, stdio: 'ignore' });
    rmSync(tmp, { recursive: true, force: true });
  };
  // Stopped by Ctrl-C or a signal: the worktrees and the redis-server go too.
  for (const signal of ['SIGINT', 'SIGTERM'])
    process.once(signal, () => {
      cleanUp();
      process.exit(130);
    });
  try {
    console.log(`building ${args.base} (A) and ${args.head} (B) in worktrees under ${tmp} ...`);
    const sides = [];
    for (const [label, rev] of [
      ['A', args.base],
      ['B', args.head],
    ]) {
      const dir = join(tmp, label);
      worktrees.push(dir);
      sides.push({ label, ...prepare(rev, dir) });
    }
    for (const s of sides) console.log(`  ${s.label}: ${s.subject}`);
    const cases = WORKLOADS.flatMap((w) =>
      [false, true].map((withRedis) => ({ ...w, redis: withRedis, key: `${w.name}${withRedis ? ', Redis' : ''}` })),
    );
    const values = Object.fromEntries(cases.map((c) => [c.key, { A: [], B: [], cpuA: [], cpuB: [] }]));
    const hostBefore = hostCpu();
    const cpuBefore = process.cpuUsage();
    let serverCpu = 0;
    const loads = [];
    for (let round = 1; round <= args.rounds; round++) {
      for (const c of cases) {
        for (const side of sides) {
          const env = c.redis ? { BENCH_REDIS_URL: redis.url } : {};
          const handle = await startServer(side, env);
          try {
            const result = await c.run(handle, c.redis, args.short);
            const value = c.value(result);
            values[c.key][side.label].push(value);
            values[c.key][`cpu${side.label}`].push(c.cpu(result));
            process.stdout.write(
              `  round ${round}/${args.rounds} ${c.key.padEnd(18)} ${side.label} ${value.toFixed(0).padStart(8)} ${c.unit}, ${c.cpu(result).toFixed(1)} ${c.cpuUnit} (load ${os.loadavg()[0].toFixed(2)})\n`,
            );
          } finally {
            serverCpu += processCpuSeconds(handle.pid);
            await handle.stop();
            if (c.redis) await flushRedis(redis.url);
          }
          loads.push(os.loadavg()[0]);
        }
      }
    }
    const cpu = process.cpuUsage(cpuBefore);
    const load = loadOver(hostBefore, hostCpu(), serverCpu + (cpu.user + cpu.system) / 1e6);
    const commands = {};
    for (const side of sides) commands[side.label] = await redisCommandsOf(side, redis.url);

    console.log(`\nA = ${sides[0].subject}\nB = ${sides[1].subject}`);
    console.log(`${args.rounds} rounds, A B alternating; node ${process.version}, ${os.cpus().length} cores`);
    if (load)
      console.log(
        `machine over the run: ${load.busyCores.toFixed(2)} cores busy on average, ${load.benchCores.toFixed(2)} of them this benchmark, ${load.otherCores.toFixed(2)} other processes; 1-min load average ${Math.min(...loads).toFixed(2)}–${Math.max(...loads).toFixed(2)}`,
      );
    const resultsDir = join(root, 'results');
    mkdirSync(resultsDir, { recursive: true });
    const file = join(resultsDir, `bench-ab-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
    writeFileSync(
      file,
      `${JSON.stringify({ base: sides[0], head: sides[1], rounds: args.rounds, short: args.short, load, values, commands }, null, 2)}\n`,
    );
    console.log(`raw results: ${file}`);
    let beyond = 0;
    for (const [title, pick, unit, higher] of [
      ['rate (higher is better)', (v) => [v.A, v.B], (c) => c.unit, true],
      ['server CPU per unit of work (lower is better)', (v) => [v.cpuA, v.cpuB], (c) => c.cpuUnit, false],
    ]) {
      console.log(`\n${title}\n| workload | A (median) | B (median) | B/A median | B/A per round (min … max) | noise band | verdict |`);
      console.log('| --- | --- | --- | --- | --- | --- | --- |');
      for (const c of cases) {
        const [A, B] = pick(values[c.key]);
        const { within, row } = compare(c.key, A, B, unit(c), higher);
        if (!within) beyond++;
        console.log(row);
      }
    }
    const { A: ca, B: cb } = commands;
    console.log(
      `\nRedis commands (counted by Redis, scripts' included), per tools/call: A ${total(ca.perCall).toFixed(2)}, B ${total(cb.perCall).toFixed(2)} (B − A: ${difference(ca.perCall, cb.perCall)}); per burst event: A ${total(ca.perEvent).toFixed(2)}, B ${total(cb.perEvent).toFixed(2)} (B − A: ${difference(ca.perEvent, cb.perEvent)})`,
    );
    console.log(`\n${beyond === 0 ? 'every comparison within noise' : `${beyond} of ${cases.length * 2} comparisons beyond noise`}`);
  } finally {
    cleanUp();
  }
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
