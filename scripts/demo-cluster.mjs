#!/usr/bin/env node
// Scale-out demo: Redis + two Redis-backed apps/express-example instances behind a plain
// round-robin proxy (no sticky sessions), for a person to try with any MCP client.
//
//   pnpm demo:cluster            (builds first if needed; needs redis-server: apt-get install -y redis-server)
//   PORT=4000 pnpm demo:cluster  (the proxy's port; default 3000, or a free one if taken)
//   pnpm demo:cluster --once     (runs the sample client below, then stops everything)
//
// Every request through the proxy is printed with the instance the proxy picked and the instance
// that answered (`x-served-by`): a resume served by the other instance shows the live tail from
// Redis; a tools/call that lands on the other instance shows the forward to the session's owner.
// Ctrl-C stops the proxy and kills the processes it started, by PID.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer, request } from 'node:http';
import { createServer as netServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const server = `${root}apps/express-example/dist/server.js`;
const once = process.argv.includes('--once');
const children = [];

function log(...args) {
  console.log(`[demo:cluster]`, ...args);
}

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

/** Starts a child and resolves once `ready(output)` is true. */
function start(name, command, args, env, ready, quiet = false) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let output = '';
    const onData = (d) => {
      output += d;
      if (!quiet) for (const line of String(d).split('\n')) if (line.trim()) console.log(`  ${name.padEnd(7)}| ${line}`);
      if (ready(output)) resolve(child);
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`${name} exited (${code}) before it was ready`)));
  });
}

function stopAll(code) {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) process.kill(child.pid, 'SIGTERM');
  setTimeout(() => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) process.kill(child.pid, 'SIGKILL');
    process.exit(code);
  }, 1_500).unref();
  Promise.all(children.map((c) => (c.exitCode !== null || c.signalCode !== null ? null : new Promise((r) => c.once('exit', r))))).then(() =>
    process.exit(code),
  );
}

function kindOf(method, body) {
  if (method !== 'POST') return method;
  try {
    const m = JSON.parse(body);
    if (typeof m.method === 'string') return m.method === 'tools/call' ? `tools/call ${m.params?.name}` : m.method;
    return 'answer to a server request';
  } catch {
    return 'POST';
  }
}

process.on('SIGINT', () => {
  log('stopping');
  stopAll(130);
});
process.on('SIGTERM', () => stopAll(143));

const redisBinary =
  spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).stdout.trim() ||
  (existsSync('/usr/bin/redis-server') ? '/usr/bin/redis-server' : '');
if (!redisBinary) {
  console.error('redis-server not found: install Redis 7 (apt-get install -y redis-server, or brew install redis) and run again');
  process.exit(1);
}
if (!existsSync(server)) {
  log('building (apps/express-example/dist is missing)');
  const r = spawnSync('npx', ['-y', 'pnpm@10.34.9', 'build'], { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

try {
  const redisPort = await freePort();
  await start(
    'redis',
    redisBinary,
    ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    {},
    (o) => o.includes('Ready to accept connections'),
    true,
  );
  const redisUrl = `redis://127.0.0.1:${redisPort}`;
  const backends = [];
  for (const name of ['node-a', 'node-b']) {
    const port = await freePort();
    await start(
      name,
      process.execPath,
      [server],
      { PORT: String(port), HOST: '127.0.0.1', REDIS_URL: redisUrl, INSTANCE_NAME: name, RETRY_MS: '1000' },
      (o) => o.includes(`:${port}/mcp`),
    );
    backends.push({ name, port });
  }

  let turn = 0;
  const owners = new Map(); // session id → the instance that answered its initialize
  const proxy = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const send = (attempt) => {
        const backend = backends[turn++ % backends.length];
        const up = request({ host: '127.0.0.1', port: backend.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
          const resume = req.headers['last-event-id'] ? ` resume after ${String(req.headers['last-event-id']).slice(-6)}` : '';
          const servedBy = answer.headers['x-served-by'] ?? '?';
          const session = req.headers['mcp-session-id'] ?? answer.headers['mcp-session-id'];
          if (!req.headers['mcp-session-id'] && session) owners.set(session, servedBy);
          const owner = owners.get(session);
          const how =
            servedBy !== backend.name
              ? ` → forwarded to owner ${servedBy}`
              : resume && owner && owner !== servedBy
                ? ` (not the owner: replay + live tail from Redis)`
                : '';
          log(`${kindOf(req.method, body.toString())}${resume}: proxy → ${backend.name}${how} (${answer.statusCode})`);
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        });
        up.on('error', (e) => {
          if (e.code === 'ECONNREFUSED' && attempt + 1 < backends.length) return send(attempt + 1);
          if (!res.headersSent) res.writeHead(502);
          res.end();
        });
        res.on('close', () => up.destroy());
        up.end(body);
      };
      send(0);
    });
  });
  const wanted = Number(process.env.PORT ?? 3000);
  const port = (await portFree(wanted)) ? wanted : await freePort();
  await new Promise((r) => proxy.listen(port, '127.0.0.1', r));
  const url = `http://127.0.0.1:${port}/mcp`;
  console.log(`\n  MCP endpoint (round-robin over node-a and node-b, Redis ${redisUrl}):\n\n    ${url}\n`);
  console.log(`  Try: npx @modelcontextprotocol/inspector  (Streamable HTTP, URL above), call long_task with`);
  console.log(`       { "steps": 20, "intervalMs": 500, "closeEvery": 4, "retryMs": 1000 } and watch the resumes below.`);
  console.log(`  Ctrl-C stops everything.\n`);

  if (once) {
    const client = new Client({ name: 'demo-cluster', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(url)));
    const steps = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => steps.push(n.params.data?.step));
    const result = await client.callTool(
      { name: 'long_task', arguments: { steps: 12, intervalMs: 100, closeEvery: 3, retryMs: 200 } },
      CallToolResultSchema,
      { timeout: 30_000 },
    );
    const okSteps = steps.length === 12 && steps.every((s, i) => s === i + 1);
    log(`result: ${JSON.stringify(result.content)}; steps ${okSteps ? 'all 12 once, in order' : JSON.stringify(steps)}`);
    await client.close();
    proxy.close();
    stopAll(okSteps ? 0 : 1);
  }
} catch (error) {
  console.error(error);
  stopAll(1);
}
