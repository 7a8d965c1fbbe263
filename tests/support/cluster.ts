/**
 * Two (or more) Redis-backed instances of apps/express-example (built dist) behind a plain
 * round-robin HTTP proxy, for cross-instance tests and the cluster demo.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { freePort } from './redis.js';

export const EXAMPLE_DIST = fileURLToPath(new URL('../../apps/express-example/dist/server.js', import.meta.url));

export interface Instance {
  name: string;
  port: number;
  readonly pid: number;
  readonly alive: boolean;
  /** Everything the process printed. */
  readonly output: string;
  start(): Promise<void>;
  /** SIGKILL (a crash) or SIGTERM (a graceful shutdown); resolves when the process has exited. */
  stop(signal?: 'SIGKILL' | 'SIGTERM'): Promise<void>;
}

export function instance(name: string, port: number, env: Record<string, string>): Instance {
  if (!existsSync(EXAMPLE_DIST)) throw new Error(`${EXAMPLE_DIST} is missing: run \`npx -y pnpm@10.34.9 build\` first`);
  let child: ChildProcess | undefined;
  let output = '';
  return {
    name,
    port,
    get pid() {
      return child?.pid ?? -1;
    },
    get alive() {
      return !!child && child.exitCode === null && child.signalCode === null;
    },
    get output() {
      return output;
    },
    async start() {
      const c = spawn(process.execPath, [EXAMPLE_DIST], {
        env: { ...process.env, HOST: '127.0.0.1', PORT: String(port), INSTANCE_NAME: name, ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child = c;
      await new Promise<void>((resolve, reject) => {
        const onData = (d: Buffer) => {
          output += d;
          if (output.includes(`:${port}/mcp`)) resolve();
        };
        c.stdout?.on('data', onData);
        c.stderr?.on('data', (d: Buffer) => (output += d));
        c.once('exit', (code) => reject(new Error(`${name} exited with ${code} before listening:\n${output}`)));
        setTimeout(() => reject(new Error(`${name} did not start within 15 s:\n${output}`)), 15_000).unref();
      });
    },
    async stop(signal = 'SIGTERM') {
      const c = child;
      if (!c || c.exitCode !== null || c.signalCode !== null) return;
      const exited = new Promise((resolve) => c.once('exit', resolve));
      process.kill(c.pid as number, signal);
      await exited;
    },
  };
}

/** One request as the proxy saw it. */
export interface ProxiedRequest {
  method: string;
  /** `initialize`, `request:<method>`, `notification:<method>`, `response` (the client's answer), or `-`. */
  kind: string;
  sessionId: string | undefined;
  lastEventId: string | undefined;
  /** Index of the backend the proxy sent it to. */
  backend: number;
  status: number;
  /** The `x-served-by` of the answer: the instance that actually served it (after any forward). */
  servedBy: string | undefined;
}

export interface RoundRobinProxy {
  url: string;
  log: ProxiedRequest[];
  close(): Promise<void>;
}

function kindOf(method: string, body: string): string {
  if (method !== 'POST') return '-';
  try {
    const msg = JSON.parse(body) as { method?: string; id?: unknown };
    if (msg.method === 'initialize') return 'initialize';
    if (typeof msg.method === 'string') return `${msg.id === undefined ? 'notification' : 'request'}:${msg.method}`;
    return 'response';
  } catch {
    return '-';
  }
}

/**
 * A plain round-robin reverse proxy: each request goes to the next backend in turn, with no
 * session affinity. A backend that refuses the connection is skipped (as a load balancer's health
 * check would); responses, SSE included, are piped through as they come.
 */
export async function roundRobinProxy(ports: number[]): Promise<RoundRobinProxy> {
  let turn = 0;
  const log: ProxiedRequest[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const header = (h: IncomingHttpHeaders, name: string) => (typeof h[name] === 'string' ? (h[name] as string) : undefined);
      const send = (attempt: number) => {
        const backend = turn++ % ports.length;
        const upstream = request(
          { host: '127.0.0.1', port: ports[backend], method: req.method, path: req.url, headers: req.headers },
          (up) => {
            log.push({
              method: req.method ?? '',
              kind: kindOf(req.method ?? '', body.toString('utf8')),
              sessionId: header(req.headers, 'mcp-session-id'),
              lastEventId: header(req.headers, 'last-event-id'),
              backend,
              status: up.statusCode ?? 0,
              servedBy: header(up.headers, 'x-served-by'),
            });
            res.writeHead(up.statusCode ?? 502, up.headers);
            up.pipe(res);
            up.on('error', () => res.destroy());
          },
        );
        upstream.on('error', (error: NodeJS.ErrnoException) => {
          if (error.code === 'ECONNREFUSED' && attempt + 1 < ports.length) return send(attempt + 1);
          if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
          res.end(`proxy: ${error.message}`);
        });
        res.on('close', () => upstream.destroy());
        upstream.end(body);
      };
      send(0);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    log,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export { freePort };
