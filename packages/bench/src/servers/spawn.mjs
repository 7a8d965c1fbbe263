// Starts each server in its own child process on a free 127.0.0.1 port, and stops it by its PID.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';

const here = dirname(fileURLToPath(import.meta.url));
export const BENCH_ROOT = join(here, '..', '..');
const NODE_FLAGS = ['--expose-gc'];

/**
 * The servers of one run. `next` is the bench's own Next.js app (`src/servers/next`), served by
 * `next start` once `next build` has produced it. A `floor` is the bare handler on a framework:
 * what the framework itself costs, run only in the workloads that have `floors`. `only` limits a
 * server to the workloads it is there for; `eras` to the protocol eras it serves (default both:
 * `legacy` workloads open 2025 sessions, `modern` ones send 2026-07-28 requests).
 */
export const SERVERS = [
  { name: 'bare', label: 'bare node:http', script: 'bare.mjs' },
  { name: 'sdk', label: 'SDK v1 transport (Express)', script: 'sdk.mjs', eras: ['legacy'] },
  { name: 'sdk-v2', label: 'SDK v2 transport (Express)', script: 'sdk-v2.mjs', eras: ['legacy'] },
  { name: 'sdk-v2-handler', label: 'SDK v2 createMcpHandler (node:http)', script: 'sdk-v2-handler.mjs', eras: ['modern'] },
  {
    name: 'sdk-v2-handler-express',
    label: 'SDK v2 createMcpHandler (Express)',
    script: 'sdk-v2-handler.mjs',
    env: { BENCH_FRAMEWORK: 'express' },
    eras: ['modern'],
  },
  { name: 'kit-express', label: 'mcp-kit Express', script: 'kit-express.mjs', floorName: 'bare-express', kit: true },
  { name: 'kit-koa', label: 'mcp-kit Koa', script: 'kit-koa.mjs', kit: true },
  { name: 'kit-next', label: 'mcp-kit Next (next start)', next: true, floorName: 'bare-next', kit: true },
  // MCP routed before Express (`mcpFirst`), the rest of the app on Express. Per-call workloads only.
  {
    name: 'kit-express-first',
    label: 'mcp-kit Express, mcpFirst',
    script: 'kit-express-first.mjs',
    only: ['throughput', 'json', 'burst', 'modern'],
    kit: true,
  },
  // mcp-kit Express serving the v2 McpServer of the SDK v2 rows (tools-v2.mjs): the same server
  // behind both transports, so the ratio to them is the transport's alone.
  {
    name: 'kit-express-v2',
    label: 'mcp-kit Express, SDK v2 server',
    script: 'kit-express.mjs',
    env: { BENCH_SDK: 'v2' },
    only: ['json', 'burst', 'modern'],
    floorName: 'bare-express',
    kit: true,
  },
  // The same Express server with hibernation on: idle sessions let their McpServer go. Memory only.
  {
    name: 'kit-express-hibernate',
    label: 'mcp-kit Express, hibernateAfterMs: 0',
    script: 'kit-express.mjs',
    env: { BENCH_HIBERNATE_MS: '0' },
    only: ['memory'],
    hibernates: true,
    kit: true,
  },
  // The Express row recorded by `@mcp-kit/core/otel` into the OpenTelemetry SDK (in-memory exporters):
  // what metrics and one span per request cost. Per-call workloads only.
  {
    name: 'kit-express-otel',
    label: 'mcp-kit Express, OpenTelemetry SDK',
    script: 'kit-express.mjs',
    env: { BENCH_OTEL: '1' },
    only: ['throughput', 'json', 'burst'],
    floorName: 'bare-express',
    kit: true,
  },
  // The Express row as an OAuth resource server: a JWT on every request, checked against the JWKS the
  // handler fetched once (servers/auth.mjs). Per-call workloads only.
  {
    name: 'kit-express-auth',
    label: 'mcp-kit Express, JWT on every request',
    script: 'kit-express.mjs',
    env: { BENCH_AUTH: '1' },
    only: ['throughput', 'json', 'modern'],
    auth: true,
    floorName: 'bare-express',
    kit: true,
  },
  { name: 'bare-express', label: 'floor: bare on Express', script: 'bare.mjs', env: { BARE_FRAMEWORK: 'express' }, floor: true },
  { name: 'bare-next', label: 'floor: bare Next route', next: true, path: '/bare', floor: true },
];

/** Whether `server` takes part in `workload` (see SERVERS and cli.mjs's WORKLOADS). */
export function serves(server, workload) {
  if (server.floor && !workload.floors) return false;
  if (server.only && !server.only.includes(workload.name)) return false;
  return (server.eras ?? ['legacy', 'modern']).includes(workload.era ?? 'legacy');
}

export const NEXT_DIR = join(here, 'next');

export function nextBuilt() {
  return existsSync(join(NEXT_DIR, '.next', 'BUILD_ID'));
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/**
 * Spawns `server` with `env` (BENCH_* settings) and resolves once its control plane answers.
 * @returns {Promise<{ server, pid, origin, path, headers, stop(): Promise<void>, output(): string }>}
 */
export async function startServer(server, env = {}) {
  const port = await freePort();
  const childEnv = {
    ...process.env,
    ...server.env,
    ...env,
    PORT: String(port),
    HOST: '127.0.0.1',
    BENCH_SERVER: server.name,
    NODE_ENV: 'production',
    NEXT_TELEMETRY_DISABLED: '1',
  };
  let child;
  if (server.next) {
    const nextBin = join(BENCH_ROOT, 'node_modules', 'next', 'dist', 'bin', 'next');
    // `next start` serves from the process it runs in, so node flags go on its command line.
    child = spawn(process.execPath, [...NODE_FLAGS, ...(env.NODE_FLAGS ?? []), nextBin, 'start', '-H', '127.0.0.1', '-p', String(port)], {
      cwd: NEXT_DIR,
      env: childEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } else {
    child = spawn(process.execPath, [...NODE_FLAGS, ...(env.NODE_FLAGS ?? []), join(here, server.script)], {
      cwd: BENCH_ROOT,
      env: childEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  }
  let log = '';
  const keep = (d) => {
    log += d;
    if (log.length > 20_000) log = log.slice(-10_000);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  let exited = false;
  const exit = new Promise((resolve) =>
    child.once('exit', (code, signal) => {
      exited = true;
      resolve({ code, signal });
    }),
  );
  const origin = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + (server.next ? 60_000 : 20_000);
  for (;;) {
    if (exited) throw new Error(`${server.name} exited before it was ready:\n${log}`);
    try {
      const res = await fetch(`${origin}/bench/stats`);
      if (res.ok) {
        await res.arrayBuffer();
        break;
      }
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      process.kill(child.pid, 'SIGKILL');
      throw new Error(`${server.name} did not answer on ${origin} in time:\n${log}`);
    }
    await sleep(100);
  }
  // A resource server's row: the token every request of the run carries (servers/auth.mjs).
  const headers = server.auth ? { authorization: `Bearer ${(await (await fetch(`${origin}/bench/token`)).json()).token}` } : {};
  return {
    server,
    pid: child.pid,
    origin,
    path: server.path ?? '/mcp',
    headers,
    output: () => log,
    async stop() {
      if (exited) return;
      process.kill(child.pid, 'SIGTERM');
      const timer = setTimeout(() => {
        if (!exited) process.kill(child.pid, 'SIGKILL');
      }, 3_000);
      await exit;
      clearTimeout(timer);
    },
  };
}
