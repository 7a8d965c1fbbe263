#!/usr/bin/env node
// Scale-out demo: Redis and three Redis-backed apps/express-example instances behind a plain
// round-robin proxy (no sticky sessions). A few SDK clients keep calling `long_task` (SEP-1699
// polling: the tool closes its stream every 2 steps and the client resumes wherever its next
// request lands) while the instances are restarted one after the other, as a rolling deploy does:
// each gets SIGTERM, drains (idle sessions handed off, running calls finished, polling clients
// sent elsewhere), exits and starts again. The output says which instance drains, where each
// session moves, and what was lost: nothing.
//
//   pnpm demo:cluster            (builds first if needed; needs redis-server: apt-get install -y redis-server)
//   pnpm demo:cluster --once     (stops after the summary; exit code 1 if anything was lost)
//   pnpm demo:cluster --redis-cluster   (on a Redis Cluster of 3 masters and 3 replicas instead of one
//                                 redis-server: the instances get REDIS_CLUSTER_NODES; needs redis-cli too)
//   PORT=4000 pnpm demo:cluster  (the proxy's port; default 3000, or a free one if taken)
//
// After the summary the cluster stays up for any MCP client (Ctrl-C stops the proxy and kills
// the processes it started, by PID).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer, request } from 'node:http';
import { createServer as netServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const serverJs = `${root}apps/express-example/dist/server.js`;
const once = process.argv.includes('--once');
const onRedisCluster = process.argv.includes('--redis-cluster');
const CLIENTS = 5;
const TASK = { steps: 8, intervalMs: 200, closeEvery: 2, retryMs: 300 };
const INSTANCE_ENV = { RETRY_MS: '500', HEARTBEAT_MS: '1000', DRAIN_MS: '15000' };
const children = new Set();

const tty = Boolean(process.stdout.isTTY) && !process.env.NO_COLOR;
const paint = (code) => (s) => (tty ? `\x1b[${code}m${s}\x1b[0m` : String(s));
const [dim, bold, red, green, yellow, cyan] = [2, 1, 31, 32, 33, 36].map(paint);
const t0 = Date.now();
const log = (line) => console.log(`${dim(`+${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s`)}  ${line}`);
const short = (sessionId) => sessionId.slice(0, 6);

function freePort() {
  return new Promise((resolve) => {
    const s = netServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

function portFree(port) {
  return new Promise((resolve) => {
    const s = netServer().once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/** The Redis Cluster of `--redis-cluster` (the testbed's, packages/testbed/src/redis-cluster.ts), once started. */
let redisCluster;

async function stopAll(code) {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) process.kill(child.pid, 'SIGKILL');
  await redisCluster?.close();
  process.exit(code);
}
process.on('SIGINT', () => stopAll(130));
process.on('SIGTERM', () => stopAll(143));

// ---- the processes ------------------------------------------------------------------------------

/** Starts a child; resolves once its output matches `ready`. `onLine` sees every line it prints. */
function start(command, args, env, ready, onLine = () => {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(child);
    child.once('exit', () => children.delete(child));
    let output = '';
    let pending = '';
    const onData = (d) => {
      output += d;
      pending += d;
      const lines = pending.split('\n');
      pending = lines.pop();
      for (const line of lines) if (line.trim()) onLine(line);
      if (ready.test(output)) resolve(child);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`${command} exited (${code}) before it was ready:\n${output}`)));
  });
}

/** A Redis-backed express-example instance that can be restarted on its port; `redis` is its REDIS_URL or REDIS_CLUSTER_NODES. */
function node(name, port, redis, sessions) {
  const self = {
    name,
    port,
    child: undefined,
    drainedMs: [],
    async start() {
      self.child = await start(
        process.execPath,
        [serverJs],
        { ...INSTANCE_ENV, PORT: String(port), HOST: '127.0.0.1', ...redis, INSTANCE_NAME: name },
        new RegExp(`:${port}/mcp`),
        (line) => self.onLine(line),
      );
    },
    onLine(line) {
      const restored = /restored session (\S+) for (\S+)/.exec(line);
      const drained = /drained in (\d+) ms/.exec(line);
      if (restored) sessions.moved(restored[1], name);
      else if (drained) {
        self.drainedMs.push(Number(drained[1]));
        log(`${yellow(name)} drained in ${drained[1]} ms: its sessions are handed off, its calls finished`);
      } else if (/\[mcp-kit\]|Error/.test(line)) log(`${red(name)} ${line}`);
    },
    /** SIGTERM, as a deploy sends it; resolves once the process has exited. */
    async stop() {
      const child = self.child;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      process.kill(child.pid, 'SIGTERM');
      await exited;
    },
  };
  return self;
}

// ---- the load balancer ---------------------------------------------------------------------------

/** Round robin, no affinity; a backend that is down (connect error) is skipped, as a load balancer does. */
function roundRobin(nodes, stats) {
  let turn = 0;
  return createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const headers = { ...req.headers };
      delete headers.connection;
      const send = (tried) => {
        let i = turn++ % nodes.length;
        while (tried.includes(i)) i = (i + 1) % nodes.length;
        const up = request(
          { host: '127.0.0.1', port: nodes[i].port, method: req.method, path: req.url, headers, agent: false },
          (answer) => {
            stats.statuses.set(answer.statusCode, (stats.statuses.get(answer.statusCode) ?? 0) + 1);
            if (req.method === 'GET' && req.headers['last-event-id']) stats.resumes++;
            if (answer.statusCode === 200 && /"method":"initialize"/.test(body.toString())) {
              stats.initializes++;
              stats.placed(answer.headers['mcp-session-id'], answer.headers['x-served-by']);
            }
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            answer.pipe(res);
            answer.on('error', () => res.destroy());
          },
        );
        up.on('error', (e) => {
          if (e.syscall === 'connect' && tried.length + 1 < nodes.length) return send([...tried, i]);
          stats.statuses.set(502, (stats.statuses.get(502) ?? 0) + 1);
          if (!res.headersSent) res.writeHead(502);
          res.end();
        });
        res.on('close', () => up.destroy());
        up.end(body);
      };
      send([]);
    });
  });
}

// ---- the clients ---------------------------------------------------------------------------------

/** Which instance holds each session (as far as the demo saw), and what moved. */
function sessionBook() {
  const book = {
    where: new Map(),
    names: new Map(),
    /** Sessions with a call running. */
    busy: new Set(),
    moves: 0,
    /** Where a session started: the instance that answered its initialize. */
    placed(sessionId, on) {
      book.where.set(sessionId, on);
    },
    on(node) {
      const held = [...book.where].filter(([, n]) => n === node).map(([id]) => id);
      const running = held.filter((id) => book.busy.has(id)).length;
      if (held.length === 0) return 'no session';
      return `${held.length} session${held.length > 1 ? 's' : ''} (${held.map(short).join(', ')}), ${running} with a call running`;
    },
    moved(sessionId, to) {
      const from = book.where.get(sessionId);
      book.where.set(sessionId, to);
      book.moves++;
      const who = book.names.get(sessionId) ?? '?';
      log(`  ${cyan(`session ${short(sessionId)}`)} (${who}) moves ${from ?? '?'} → ${bold(to)}: restored there from its record in Redis`);
    },
  };
  return book;
}

async function client(i, url, sessions, totals, keepGoing, changed) {
  const name = `client-${i + 1}`;
  const c = new Client({ name, version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  let steps = [];
  c.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    if (typeof n.params.data?.step === 'number') steps.push(n.params.data.step);
    changed();
  });
  await c.connect(transport);
  const sessionId = transport.sessionId;
  sessions.names.set(sessionId, name);
  return {
    name,
    sessionId,
    calls: 0,
    /** Steps of the call running now. */
    get steps() {
      return steps.length;
    },
    async run() {
      for (let last = false; !last;) {
        last = !keepGoing();
        steps = [];
        let lost;
        sessions.busy.add(sessionId);
        try {
          const result = await c.callTool({ name: 'long_task', arguments: TASK }, CallToolResultSchema, { timeout: 60_000 });
          const inOrder = steps.length === TASK.steps && steps.every((s, k) => s === k + 1);
          if (!inOrder) lost = `steps ${JSON.stringify(steps)}`;
          else if (result.content[0]?.text !== `completed ${TASK.steps} steps`) lost = `result ${JSON.stringify(result.content)}`;
        } catch (error) {
          lost = error.message;
        }
        sessions.busy.delete(sessionId);
        this.calls++;
        changed();
        totals.calls++;
        totals.steps += steps.length;
        if (lost) totals.lost.push(`${name}: ${lost}`);
        if (transport.sessionId !== sessionId) totals.reinitialized.add(name);
        await new Promise((resolve) => setTimeout(resolve, 200 + Math.floor(Math.random() * 600)));
      }
    },
    close: () => c.close(),
  };
}

// ---- the demo ------------------------------------------------------------------------------------

const redisBinary =
  spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).stdout.trim() ||
  (existsSync('/usr/bin/redis-server') ? '/usr/bin/redis-server' : '');
if (!redisBinary) {
  console.error('redis-server not found: install Redis 7 (apt-get install -y redis-server, or brew install redis) and run again');
  process.exit(1);
}
if (!existsSync(serverJs)) {
  console.log('demo:cluster: building (apps/express-example/dist is missing)');
  const r = spawnSync('npx', ['-y', 'pnpm@10.34.9', 'build'], { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

try {
  let redis;
  let where;
  if (onRedisCluster) {
    // The testbed's Redis Cluster (TypeScript, loaded through tsx): the one the tests start.
    const { tsImport } = await import('tsx/esm/api');
    const { startRedisCluster } = await tsImport('../packages/testbed/src/redis-cluster.ts', import.meta.url);
    redisCluster = await startRedisCluster();
    redis = { REDIS_CLUSTER_NODES: redisCluster.nodesEnv };
    const masters = await redisCluster.masters();
    where = `Redis Cluster ${redisCluster.nodesEnv} (masters ${masters.map((m) => `:${m.port}`).join(' ')}, one replica each)`;
  } else {
    const redisPort = await freePort();
    await start(
      redisBinary,
      ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      {},
      /Ready to accept/,
    );
    redis = { REDIS_URL: `redis://127.0.0.1:${redisPort}` };
    where = `Redis ${redis.REDIS_URL}`;
  }
  const sessions = sessionBook();
  const nodes = [];
  for (const name of ['node-a', 'node-b', 'node-c']) nodes.push(node(name, await freePort(), redis, sessions));
  await Promise.all(nodes.map((n) => n.start()));
  const stats = { statuses: new Map(), resumes: 0, initializes: 0, placed: sessions.placed };
  const proxy = roundRobin(nodes, stats);
  const wanted = Number(process.env.PORT ?? 3000);
  const port = (await portFree(wanted)) ? wanted : await freePort();
  await new Promise((resolve) => proxy.listen(port, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${port}/mcp`;
  log(`${where}; ${nodes.map((n) => `${n.name} :${n.port}`).join(', ')}; round-robin proxy ${bold(url)}`);
  log(`each instance's live page: ${nodes.map((n) => `http://127.0.0.1:${n.port}/mcp-kit/live`).join('  ')}`);

  // Clients connect through the proxy; each session lives on the instance that answered its initialize.
  const totals = { calls: 0, steps: 0, lost: [], reinitialized: new Set() };
  const waiters = new Set();
  const changed = () => {
    for (const waiter of [...waiters]) waiter();
  };
  let rolling = true;
  const clients = [];
  // At once, so that their initializes spread over the instances in the proxy's turn.
  clients.push(...(await Promise.all(Array.from({ length: CLIENTS }, (_, i) => client(i, url, sessions, totals, () => rolling, changed)))));
  for (const c of clients) log(`${c.name} connected: ${cyan(`session ${short(c.sessionId)}`)} on ${sessions.where.get(c.sessionId)}`);
  log(`each client calls long_task ${JSON.stringify(TASK)} again and again, with pauses between calls`);
  const runs = clients.map((c) => c.run());
  /** Resolves once `check()` holds, checked whenever a step or a call ends. */
  const until = (check) =>
    new Promise((resolve) => {
      const waiter = () => check() && (waiters.delete(waiter), resolve());
      waiters.add(waiter);
      waiter();
    });
  const callsEach = (n) => {
    const target = clients.map((c) => c.calls + n);
    return until(() => clients.every((c, k) => c.calls >= target[k]));
  };
  /** A call on `node` is a few steps in: its client is polling, the tool is running there. */
  const midCallOn = (node) =>
    until(() => clients.some((c) => sessions.where.get(c.sessionId) === node && sessions.busy.has(c.sessionId) && c.steps >= 3));
  await callsEach(1);

  for (const n of nodes) {
    // Deploys do not wait for a quiet moment: SIGTERM comes while a call runs there (if it holds one).
    await Promise.race([midCallOn(n.name), callsEach(2)]);
    log(bold(`── rolling restart: SIGTERM → ${n.name}, which holds ${sessions.on(n.name)}`));
    const stopped = Date.now();
    await n.stop();
    log(`${yellow(n.name)} exited ${Date.now() - stopped} ms after SIGTERM; starting it again`);
    await n.start();
    log(`${green(n.name)} is back (a new instance: it holds no session until one moves to it)`);
    await callsEach(1);
  }
  rolling = false;
  log('rolling restart done; each client finishes one more call');
  await Promise.all(runs);
  await Promise.all(clients.map((c) => c.close()));

  const statuses = [...stats.statuses]
    .sort(([a], [b]) => a - b)
    .map(([s, n]) => `${n}×${s}`)
    .join(', ');
  const lost = totals.lost.length;
  console.log('');
  log(
    bold(
      `${totals.calls} calls, ${totals.steps} steps, ${stats.resumes} resumes, ${sessions.moves} session moves, ` +
        `drains of ${nodes.map((n) => `${n.drainedMs.at(-1)} ms`).join(' / ')}`,
    ),
  );
  log(
    `HTTP through the proxy: ${statuses}; sessions initialized: ${stats.initializes} (one per client), re-initialized: ${totals.reinitialized.size}`,
  );
  if (redisCluster) {
    // Each session's keys are in its slot's master: the keys spread over the masters.
    const { redisCommand } = await (await import('tsx/esm/api')).tsImport('../packages/testbed/src/redis-command.ts', import.meta.url);
    const spread = [];
    for (const m of await redisCluster.masters()) spread.push(`:${m.port} ${await redisCommand(m.port, 'DBSIZE')}`);
    log(`keys per master of the Redis Cluster: ${spread.join(', ')}`);
  }
  if (lost === 0 && totals.reinitialized.size === 0 && !stats.statuses.has(404)) {
    log(green(bold('0 lost: every call completed, every step arrived once and in order, no 404, no client started over')));
  } else {
    log(red(bold(`${lost} lost`)));
    for (const l of totals.lost) log(red(`  ${l}`));
  }
  if (once) {
    proxy.close();
    await stopAll(lost === 0 ? 0 : 1);
  } else {
    console.log(`\n  The cluster stays up: ${bold(url)} (Streamable HTTP) for any MCP client, e.g.`);
    console.log(`  npx @modelcontextprotocol/inspector, calling long_task with ${JSON.stringify({ ...TASK, steps: 20 })}.`);
    console.log(`  Ctrl-C stops everything.\n`);
  }
} catch (error) {
  console.error(error);
  await stopAll(1);
}
