#!/usr/bin/env node
// What a deployment's sessions cost, on this machine (after `pnpm build`; needs redis-server):
//   pnpm bench:scale                       100,000 sessions, both cluster modes (a few minutes)
//   pnpm bench:scale --sessions 1000000    on a bigger box
//   pnpm bench:scale --short               a few thousand sessions, well under a minute (npm test)
// Options: --modes forward,shared  --instances 3  --clients 32  --share 0.01  --no-reference  --json <file>
//   --hibernate-ms 0|<ms>|off (part 2's HIBERNATE_MS; `off`: only the default MAX_SESSIONS lets sessions go)
//
// 1. initialize/s per instance, 32 keep-alive clients (`initialize` + `notifications/initialized`),
//    beside the SDK v1 transport's per-session routing in memory, in the same run: the bench's SDK v1
//    and mcp-kit Express servers in memory, then one express-example on its own redis-server per
//    cluster mode, all with HIBERNATE_MS=0. Each row: the rate, and the server's CPU per initialize
//    (what a core of this machine would sustain: steadier than the rate on a shared machine).
// 2. Per mode: a redis-server and `--instances` express-example processes (HIBERNATE_MS=0,
//    SESSION_TTL_MS one hour, each with a reading of its heap after GC and its CPU on a port of its
//    own: scripts/bench-scale-instance.mjs). N sessions opened across them round-robin (a progress
//    line while it runs), left idle, then a share of them called again through a random instance:
//    bytes per idle session on the instances (heap after GC) and in Redis (used_memory), Redis
//    commands per initialize, per call and per event (INFO commandstats counts what scripts run;
//    idle traffic, measured meanwhile, subtracted), and sessions lost, which must be 0.
// Exit code 1 when a session was lost or a request failed. Nothing asserts a timing.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { McpHttp } from '../packages/bench/src/client/mcp.mjs';
import { freePort, SERVERS, startServer } from '../packages/bench/src/servers/spawn.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const APP = join(root, 'apps', 'express-example', 'dist', 'server.js');
const STATS_PRELOAD = join(root, 'scripts', 'bench-scale-instance.mjs');

function parseArgs(argv) {
  const args = {
    sessions: 100_000,
    modes: ['forward', 'shared'],
    instances: 3,
    clients: 32,
    share: 0.01,
    reference: true,
    json: undefined,
    /** The instances' HIBERNATE_MS in part 2: `off` keeps idle sessions' servers, so only `MAX_SESSIONS` (10,000) lets sessions go. */
    hibernate: '0',
  };
  let short = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      const value = argv[++i];
      if (value === undefined) throw new Error(`${a} needs a value`);
      return value;
    };
    if (a === '--') continue;
    else if (a === '--short') short = true;
    else if (a === '--sessions') args.sessions = Number(next());
    else if (a === '--modes') args.modes = next().split(',');
    else if (a === '--instances') args.instances = Number(next());
    else if (a === '--clients') args.clients = Number(next());
    else if (a === '--share') args.share = Number(next());
    else if (a === '--no-reference') args.reference = false;
    else if (a === '--hibernate-ms') args.hibernate = next();
    else if (a === '--json') args.json = next();
    else throw new Error(`unknown argument ${a}`);
  }
  if (short && !argv.includes('--sessions')) args.sessions = 3_000;
  args.short = short;
  args.initializeSeconds = short ? 1 : 8;
  if (!Number.isInteger(args.sessions) || args.sessions < args.instances)
    throw new Error('--sessions must be a whole number ≥ the instances');
  for (const mode of args.modes)
    if (mode !== 'forward' && mode !== 'shared') throw new Error(`--modes takes forward and shared (got ${mode})`);
  return args;
}

const fmt = (n, digits = 0) => n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

/** Children started here, stopped by their PID however the run ends. */
const children = new Set();
function track(child) {
  children.add(child);
  child.once('exit', () => children.delete(child));
  return child;
}
function stopChildren() {
  for (const child of children) {
    try {
      process.kill(child.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}
process.on('exit', stopChildren);
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => process.exit(130));

async function startRedis() {
  const port = await freePort();
  const child = track(
    spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' }),
  );
  child.on('error', (e) => {
    console.error(`redis-server could not start (${e.message}); install it: apt-get install -y redis-server`);
    process.exit(1);
  });
  // Its errors (refused while redis-server starts) are thrown, not printed.
  const cli = (...command) =>
    execFileSync('redis-cli', ['-p', String(port), ...command], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  for (let i = 0; ; i++) {
    try {
      if (cli('PING').trim() === 'PONG') break;
    } catch {
      if (i > 50) throw new Error('redis-server did not answer');
    }
    await sleep(50);
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    /** Calls per command name since Redis started (commands run by scripts included). */
    commands() {
      const counts = {};
      for (const [, name, calls] of cli('INFO', 'commandstats').matchAll(/^cmdstat_(\S+?):calls=(\d+)/gm)) counts[name] = Number(calls);
      return counts;
    },
    usedMemory: () => Number(/used_memory:(\d+)/.exec(cli('INFO', 'memory'))[1]),
    keys: () => Number(cli('DBSIZE').trim()),
    /** Redis' own CPU time so far (user + system), in µs. */
    cpuUs: () => {
      const info = cli('INFO', 'cpu');
      return (Number(/used_cpu_user:([\d.]+)/.exec(info)[1]) + Number(/used_cpu_sys:([\d.]+)/.exec(info)[1])) * 1e6;
    },
    /** The replies to `commands` (one per line, sent in one go), one line each: for commands with a one-line reply. */
    batch: (commands) =>
      execFileSync('redis-cli', ['-p', String(port)], { input: `${commands.join('\n')}\n`, encoding: 'utf8' })
        .trimEnd()
        .split('\n'),
    /** Keys matching a glob (`KEYS`: a bench's sample only, never a product's path). */
    keysMatching: (pattern) =>
      cli('KEYS', pattern)
        .split('\n')
        .filter((line) => line !== ''),
    stop: () => child.kill('SIGKILL'),
  };
}

/** What Redis ran between two `commands()` readings, less `idlePerMs × ms` (heartbeats and sweeps of the idle deployment). */
function commandsBetween(before, after, idle = { perMs: 0 }, ms = 0) {
  let total = 0;
  const byName = {};
  for (const [name, calls] of Object.entries(after)) {
    const n = calls - (before[name] ?? 0);
    if (n > 0) {
      byName[name] = n;
      total += n;
    }
  }
  return { total: Math.max(0, total - idle.perMs * ms), byName };
}

/** One express-example process, with its heap and CPU readable on a port of its own. */
async function startApp(name, env) {
  if (!existsSync(APP)) throw new Error(`${APP} is missing: run \`npx -y pnpm@10.34.9 build\` first`);
  const port = await freePort();
  const statsPort = await freePort();
  const child = track(
    spawn(process.execPath, ['--expose-gc', '--import', STATS_PRELOAD, APP], {
      env: {
        ...process.env,
        PORT: String(port),
        HOST: '127.0.0.1',
        INSTANCE_NAME: name,
        LIVE_PAGE: '0',
        BENCH_STATS_PORT: String(statsPort),
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const deadline = Date.now() + 20_000;
  while (!output.includes(`:${port}/mcp`)) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`${name} did not start:\n${output}`);
    await sleep(50);
  }
  return {
    name,
    origin: `http://127.0.0.1:${port}`,
    output: () => output,
    stats: async (gc = true) => (await fetch(`http://127.0.0.1:${statsPort}/${gc ? '' : '?nogc'}`)).json(),
    stop: () => child.kill('SIGKILL'),
  };
}

/** `clients` loops of initialize + notifications/initialized on `http` for `seconds`; the rate and the server's CPU per initialize. */
async function initializeRate(http, seconds, clients, cpuUs) {
  for (let i = 0; i < 50; i++) await http.initialize();
  const cpu0 = await cpuUs();
  const started = performance.now();
  const end = started + seconds * 1000;
  let done = 0;
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (performance.now() < end) {
        await http.initialize();
        done++;
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  return { perSec: done / elapsed, cpuUsPerInitialize: ((await cpuUs()) - cpu0) / done, initializes: done };
}

/** Part 1: initialize/s of one instance, beside the SDK v1 transport in memory. */
async function initializeRows(args) {
  const rows = [];
  const bench = async (label, server, env) => {
    const started = await startServer(server, env);
    try {
      const http = new McpHttp(started.origin, { connections: args.clients });
      const cpuUs = async () => {
        const s = await (await fetch(`${started.origin}/bench/stats?nogc`)).json();
        return s.cpuUserUs + s.cpuSystemUs;
      };
      rows.push({ label, ...(await initializeRate(http, args.initializeSeconds, args.clients, cpuUs)) });
      await http.close();
    } finally {
      await started.stop();
    }
  };
  const byName = (name) => SERVERS.find((s) => s.name === name);
  // The floor: the same two requests answered by node:http with no MCP behind them, on the same
  // cores as the load generator (no server can pass it on this machine).
  await bench('bare node:http (the floor), in memory', byName('bare'));
  await bench('SDK v1 transport (Express), in memory', byName('sdk'));
  await bench('mcp-kit Express, in memory', byName('kit-express'));
  await bench('mcp-kit Express, in memory, hibernateAfterMs: 0', byName('kit-express'), { BENCH_HIBERNATE_MS: '0' });
  for (const mode of args.modes) {
    const redis = await startRedis();
    const app = await startApp(`init-${mode}`, { REDIS_URL: redis.url, CLUSTER: mode, HIBERNATE_MS: '0', SESSION_TTL_MS: '3600000' });
    try {
      const http = new McpHttp(app.origin, { connections: args.clients });
      const cpuUs = async () => (await app.stats()).cpuUs;
      rows.push({
        label: `express-example on Redis, ${mode}, HIBERNATE_MS=0`,
        ...(await initializeRate(http, args.initializeSeconds, args.clients, cpuUs)),
      });
      await http.close();
    } finally {
      app.stop();
      redis.stop();
    }
  }
  return rows;
}

/** A progress line: in place on a terminal, every few seconds in a log. */
function progress(label) {
  const tty = process.stdout.isTTY;
  let last = 0;
  return {
    update(text) {
      const now = Date.now();
      if (tty) process.stdout.write(`\r${label}: ${text}   `);
      else if (now - last >= 5_000) {
        console.log(`${label}: ${text}`);
        last = now;
      }
    },
    done(text) {
      if (tty) process.stdout.write(`\r${label}: ${text}   \n`);
      else console.log(`${label}: ${text}`);
    },
  };
}

/** `count` distinct indexes of `0..n-1`, at random. */
function sample(n, count) {
  const picked = new Set();
  while (picked.size < Math.min(n, count)) picked.add(Math.floor(Math.random() * n));
  return [...picked];
}

/** Runs `work(item)` for every item, `concurrency` at a time. */
async function pool(items, concurrency, work) {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) await work(items[next++]);
    }),
  );
}

/**
 * What the keys of an idle session hold, on average over `ids` (MEMORY USAGE): its hash
 * (`{<id>}:s`: what restores it, its principal, its owner, its streams' registrations) and its
 * streams (the `initialize` answer's, until `streamTtlMs`). Keys as in packages/redis/src/keyspace.ts.
 */
function keyBreakdown(redis, ids) {
  const prefix = 'mcp-kit:';
  const mean = (keys) =>
    redis
      .batch(keys.map((key) => `MEMORY USAGE ${key}`))
      .map((line) => Number(line) || 0)
      .reduce((a, b) => a + b, 0) / ids.length;
  const hashes = ids.map((id) => `${prefix}{${id}}:s`);
  const others = ids.flatMap((id) => redis.keysMatching(`${prefix}{${id}}:*`)).filter((key) => !key.endsWith(':s'));
  return { hash: mean(hashes), streams: others.length > 0 ? mean(others) : 0 };
}

/** The instances' CPU time so far, all together, in µs. */
async function instancesCpu(apps) {
  return (await Promise.all(apps.map((app) => app.stats(false)))).reduce((sum, s) => sum + s.cpuUs, 0);
}

/** Part 2: one cluster mode at scale. */
async function scale(args, mode) {
  const redis = await startRedis();
  const apps = [];
  try {
    const env = {
      REDIS_URL: redis.url,
      CLUSTER: mode,
      SESSION_TTL_MS: '3600000',
      ...(args.hibernate === 'off' ? {} : { HIBERNATE_MS: args.hibernate }),
    };
    for (let i = 0; i < args.instances; i++) apps.push(await startApp(`${mode}-${i}`, env));
    const clients = apps.map((app) => new McpHttp(app.origin, { connections: Math.ceil(args.clients / apps.length) }));
    // Warm-up: each instance has answered (its first initialize builds a server, whose answer later
    // ones reuse), and its code is compiled: what grows with the first thousand requests (optimized
    // code, inline caches) is not what a session costs.
    const warm = Math.min(2_000, Math.max(20, Math.round(args.sessions / args.instances / 10)));
    await Promise.all(clients.map((http) => pool(Array.from({ length: warm }), 8, () => http.initialize())));
    await sleep(1_500);
    const base = await Promise.all(apps.map((app) => app.stats()));
    const redisBase = { memory: redis.usedMemory(), keys: redis.keys() };

    // Idle traffic: what the deployment sends Redis with nothing to do (heartbeats, sweeps).
    const idleStart = redis.commands();
    await sleep(2_000);
    const idle = { perMs: commandsBetween(idleStart, redis.commands()).total / 2_000 };

    const sessions = [];
    const perInstance = apps.map(() => 0);
    const line = progress(`${mode}: opening ${fmt(args.sessions)} sessions on ${apps.length} instances`);
    let failed = 0;
    const opening = redis.commands();
    const openingCpu = redis.cpuUs();
    const started = performance.now();
    const ticker = setInterval(() => {
      const s = (performance.now() - started) / 1000;
      line.update(`${fmt(sessions.length)} (${fmt(sessions.length / s)}/s)`);
    }, 500);
    let issued = 0;
    await Promise.all(
      Array.from({ length: args.clients }, async (_, c) => {
        const index = c % apps.length;
        while (issued < args.sessions) {
          issued++;
          try {
            const session = await clients[index].initialize();
            sessions.push({ ...session, instance: index });
            perInstance[index]++;
          } catch (error) {
            if (++failed <= 3) console.error(`\ninitialize failed: ${error.message}`);
          }
        }
      }),
    );
    clearInterval(ticker);
    const openSeconds = (performance.now() - started) / 1000;
    line.done(`${fmt(sessions.length)} in ${fmt(openSeconds, 1)} s (${fmt(sessions.length / openSeconds)}/s), ${failed} failed`);
    // Idle now: every session is let go of at the next sweep (HIBERNATE_MS=0), its hand-off sent.
    await sleep(1_500);
    const openedCommands = commandsBetween(opening, redis.commands(), idle, (performance.now() - started) | 0);
    const redisCpuPerInitialize = (redis.cpuUs() - openingCpu) / sessions.length;
    const after = await Promise.all(apps.map((app) => app.stats()));
    const heapPerSession = after.map((s, i) => (s.heapUsed - base[i].heapUsed) / perInstance[i]);
    const cpuPerInitialize = after.map((s, i) => (s.cpuUs - base[i].cpuUs) / perInstance[i]);
    const redisPerSession = {
      bytes: (redis.usedMemory() - redisBase.memory) / sessions.length,
      keys: (redis.keys() - redisBase.keys) / sessions.length,
    };
    const redisKeys = keyBreakdown(
      redis,
      sample(sessions.length, 50).map((i) => sessions[i].id),
    );

    // A share called again, each through a random instance: answered, or lost.
    const again = sample(sessions.length, Math.max(50, Math.round(sessions.length * args.share))).map((i) => sessions[i]);
    const statuses = {};
    const calling = redis.commands();
    const callingCpu = { redis: redis.cpuUs(), instances: await instancesCpu(apps) };
    const callsStarted = performance.now();
    await pool(again, args.clients, async (session) => {
      const http = clients[Math.floor(Math.random() * clients.length)];
      let status;
      try {
        const r = await http.callTool(session, 'test_simple_text');
        status = r.status === 200 && r.text.includes('simple text response') ? '200' : String(r.status);
      } catch (error) {
        status = `error ${error.code ?? error.message}`;
      }
      statuses[status] = (statuses[status] ?? 0) + 1;
    });
    await sleep(1_000); // the let-go after each call, at the next sweep
    const callCommands = commandsBetween(calling, redis.commands(), idle, (performance.now() - callsStarted) | 0);
    const redisCpuPerCall = (redis.cpuUs() - callingCpu.redis) / again.length;
    const instanceCpuPerCall = ((await instancesCpu(apps)) - callingCpu.instances) / again.length;

    // Per event: long_task of 21 steps against 1 step, on sessions let go of like the others: the
    // difference is what 20 more events cost, whatever a call itself costs.
    const eventSessions = sample(sessions.length, Math.min(50, sessions.length)).map((i) => sessions[i]);
    const run = async (steps) => {
      const before = redis.commands();
      const cpu = redis.cpuUs();
      const t = performance.now();
      await pool(eventSessions, 8, async (session) => {
        const r = await clients[session.instance].callTool(session, 'long_task', { steps, intervalMs: 0 });
        if (r.status !== 200 || !r.text.includes(`completed ${steps} steps`))
          statuses[`long_task ${r.status}`] = (statuses[`long_task ${r.status}`] ?? 0) + 1;
      });
      await sleep(1_000);
      return { commands: commandsBetween(before, redis.commands(), idle, (performance.now() - t) | 0).total, cpu: redis.cpuUs() - cpu };
    };
    const one = await run(1);
    const many = await run(21);
    const perEvent = (many.commands - one.commands) / (eventSessions.length * 20);
    const redisCpuPerEvent = (many.cpu - one.cpu) / (eventSessions.length * 20);

    // Per call on a session held in memory (an active one): on each session a long_task of one
    // 200 ms step restores it and keeps it busy, and once its stream is open 10 calls go to it at
    // once, against the long_task alone: the difference is what 10 calls on a held session cost.
    const heldSessions = sample(sessions.length, Math.min(50, sessions.length)).map((i) => sessions[i]);
    const burst = async (calls) => {
      const before = { commands: redis.commands(), redis: redis.cpuUs(), instances: await instancesCpu(apps) };
      const t = performance.now();
      await pool(heldSessions, 8, async (session) => {
        const http = clients[Math.floor(Math.random() * clients.length)];
        let opened;
        const open = new Promise((resolve) => (opened = resolve));
        const holding = http.callTool(session, 'long_task', { steps: 1, intervalMs: 200 }, () => opened());
        await Promise.race([open, holding]);
        const answers = await Promise.all([holding, ...Array.from({ length: calls }, () => http.callTool(session, 'test_simple_text'))]);
        for (const r of answers) if (r.status !== 200) statuses[`held ${r.status}`] = (statuses[`held ${r.status}`] ?? 0) + 1;
      });
      await sleep(1_000);
      return {
        commands: commandsBetween(before.commands, redis.commands(), idle, (performance.now() - t) | 0).total,
        redis: redis.cpuUs() - before.redis,
        instances: (await instancesCpu(apps)) - before.instances,
      };
    };
    const single = await burst(0);
    const eleven = await burst(10);
    const held = heldSessions.length * 10;
    const heldCall = {
      commands: (eleven.commands - single.commands) / held,
      redisCpu: (eleven.redis - single.redis) / held,
      instanceCpu: (eleven.instances - single.instances) / held,
    };

    const lost = again.length - (statuses['200'] ?? 0);
    for (const http of clients) await http.close();
    return {
      mode,
      sessions: sessions.length,
      failedInitializes: failed,
      initializePerSec: sessions.length / openSeconds,
      perInstance,
      heapPerSession,
      cpuPerInitialize,
      redisPerSession,
      redisKeys,
      commandsPerInitialize: openedCommands.total / sessions.length,
      commandsPerCall: callCommands.total / again.length,
      redisCpuPerInitialize,
      redisCpuPerCall,
      instanceCpuPerCall,
      redisCpuPerEvent,
      callCommandsByName: Object.fromEntries(Object.entries(callCommands.byName).map(([k, v]) => [k, v / again.length])),
      commandsPerEvent: perEvent,
      heldCall,
      calledAgain: again.length,
      statuses,
      lost,
    };
  } finally {
    for (const app of apps) app.stop();
    redis.stop();
  }
}

function report(args, rows, results) {
  const out = [];
  if (rows.length > 0) {
    out.push(
      `\ninitialize + notifications/initialized, one instance, ${args.clients} keep-alive clients, ${args.initializeSeconds} s each`,
    );
    const sdk = rows.find((r) => r.label.startsWith('SDK v1')) ?? rows[0];
    for (const r of rows) {
      out.push(
        `  ${r.label.padEnd(56)} ${fmt(r.perSec).padStart(7)}/s  ${fmt(r.perSec / sdk.perSec, 2)}× SDK v1   ` +
          `server CPU ${fmt(r.cpuUsPerInitialize).padStart(6)} µs per initialize (${fmt(1e6 / r.cpuUsPerInitialize)}/s per core)`,
      );
    }
  }
  for (const r of results) {
    out.push(
      `\n${r.mode}: ${fmt(r.sessions)} sessions on ${r.perInstance.length} instances (HIBERNATE_MS=${args.hibernate}), ${r.failedInitializes} initialize failed`,
    );
    out.push(
      `  initialize/s, all instances       ${fmt(r.initializePerSec)} (server CPU per initialize: ${r.cpuPerInitialize.map((c) => `${fmt(c)} µs`).join(', ')})`,
    );
    out.push(`  heap per idle session, instances  ${r.heapPerSession.map((b) => `${fmt(b)} B`).join(', ')}  (after GC)`);
    out.push(
      `  Redis per idle session            ${fmt(r.redisPerSession.bytes)} B, ${fmt(r.redisPerSession.keys, 2)} keys (used_memory, DBSIZE)`,
    );
    const keys = Object.entries(r.redisKeys)
      .map(([k, v]) => `${k} ${fmt(v)} B`)
      .join(', ');
    out.push(`    by key (MEMORY USAGE)           ${keys}`);
    out.push(
      `  Redis commands per initialize     ${fmt(r.commandsPerInitialize, 2)}  (its let-go included); Redis CPU ${fmt(r.redisCpuPerInitialize)} µs`,
    );
    const byName = Object.entries(r.callCommandsByName)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k} ${fmt(v, 2)}`)
      .join(', ');
    out.push(`  Redis commands per tools/call     ${fmt(r.commandsPerCall, 2)}  (a session let go of, restored by the call: ${byName})`);
    out.push(`    CPU per tools/call              Redis ${fmt(r.redisCpuPerCall)} µs, the instances ${fmt(r.instanceCpuPerCall)} µs`);
    out.push(
      `  … on a session held in memory      ${fmt(r.heldCall.commands, 2)} commands; CPU: Redis ${fmt(r.heldCall.redisCpu)} µs, the instances ${fmt(r.heldCall.instanceCpu)} µs (10 calls at once against none)`,
    );
    out.push(
      `  Redis commands per event          ${fmt(r.commandsPerEvent, 2)}  (long_task of 21 steps against 1); Redis CPU ${fmt(r.redisCpuPerEvent)} µs`,
    );
    out.push(
      `  called again                      ${fmt(r.calledAgain)}: ${Object.entries(r.statuses)
        .map(([k, v]) => `${k} × ${v}`)
        .join(', ')}`,
    );
    out.push(`  sessions lost                     ${r.lost}`);
  }
  console.log(out.join('\n'));
}

const args = parseArgs(process.argv.slice(2));
console.log(
  `bench:scale: ${fmt(args.sessions)} sessions, modes ${args.modes.join(', ')}, ${args.instances} instances, ${args.clients} clients` +
    (args.short ? ' (short: checks the script, its figures are not to be read)' : ''),
);
const rows = args.reference ? await initializeRows(args) : [];
const results = [];
for (const mode of args.modes) results.push(await scale(args, mode));
report(args, rows, results);
const file = args.json ?? join(root, 'results', `bench-scale${args.short ? '-short' : ''}.json`);
mkdirSync(dirname(file), { recursive: true });
writeFileSync(file, `${JSON.stringify({ args, at: new Date().toISOString(), initialize: rows, scale: results }, null, 2)}\n`);
const bad = results.some((r) => r.lost > 0 || r.failedInitializes > 0);
if (bad) console.error('\n✗ sessions were lost or initializes failed');
process.exit(bad ? 1 : 0);
