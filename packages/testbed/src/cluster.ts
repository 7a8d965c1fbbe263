/**
 * Redis-backed instances of the example apps (apps/express-example by default; each app's build)
 * behind a plain round-robin HTTP proxy, for cross-instance tests and the cluster demo. Every
 * process here is started by the test and stopped by its PID.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { freePort, startProcess } from './processes.js';
import { startRedis, type TestRedis } from './redis.js';
import { startRedisCluster, type TestRedisCluster } from './redis-cluster.js';

/** The cluster mode the suites run in: `forward` (instances reach each other at INTERNAL_URL, the default) or `shared`. */
export const CLUSTER_MODE: 'forward' | 'shared' = process.env.MCP_KIT_CLUSTER === 'shared' ? 'shared' : 'forward';

/**
 * The Redis the suites run on: one redis-server (the default), or with `MCP_KIT_REDIS=cluster` a
 * Redis Cluster of 3 masters and 3 replicas (redis-cluster.ts), which the instances find through
 * `REDIS_CLUSTER_NODES`. Either is stopped (the whole of it) and started again the same way.
 */
export const REDIS_KIND: 'server' | 'cluster' = process.env.MCP_KIT_REDIS === 'cluster' ? 'cluster' : 'server';

/** The suites' Redis (see {@link REDIS_KIND}), with what an instance is given to find it. */
export type SuiteRedis = (TestRedis | TestRedisCluster) & {
  /** `REDIS_URL`, or `REDIS_CLUSTER_NODES`. */
  readonly env: Record<string, string>;
  readonly cluster: TestRedisCluster | undefined;
};

/**
 * Starts the suites' Redis: with `aofDir`, it keeps what it acknowledged across a restart (on a
 * Redis Cluster each node keeps its own append-only file); `args` go on every server's command line.
 */
export async function startSuiteRedis(options: { aofDir?: string; args?: readonly string[] } = {}): Promise<SuiteRedis> {
  if (REDIS_KIND === 'cluster') {
    const cluster = await startRedisCluster({ appendOnly: options.aofDir !== undefined, args: options.args });
    return Object.assign(cluster, { env: { REDIS_CLUSTER_NODES: cluster.nodesEnv }, cluster });
  }
  const redis = await startRedis(options);
  return Object.assign(redis, { env: { REDIS_URL: redis.url }, cluster: undefined });
}

export type ExampleAppName = 'express-example' | 'koa-example' | 'next-example';
export const EXAMPLE_APPS: readonly ExampleAppName[] = ['express-example', 'koa-example', 'next-example'];

const appDir = (app: ExampleAppName) => fileURLToPath(new URL(`../../../apps/${app}/`, import.meta.url));

/**
 * How one instance of `app` is started, as its `start` script does it: the built server, or
 * `next start` of the built Next app (with NEXT_MANUAL_SIG_HANDLE, so SIGTERM drains as the app's
 * own handler says). Throws when the build is missing.
 */
function launch(app: ExampleAppName, port: number): { args: string[]; cwd: string; env: Record<string, string> } {
  const cwd = appDir(app);
  const built = app === 'next-example' ? `${cwd}.next/BUILD_ID` : `${cwd}dist/server.js`;
  if (!existsSync(built)) throw new Error(`${built} is missing: run \`npx -y pnpm@10.34.9 build\` first`);
  if (app !== 'next-example') return { args: [`${cwd}dist/server.js`], cwd, env: {} };
  const next = `${cwd}node_modules/next/dist/bin/next`;
  return {
    args: [next, 'start', '-H', '127.0.0.1', '-p', String(port)],
    cwd,
    env: { NEXT_TELEMETRY_DISABLED: '1', NEXT_MANUAL_SIG_HANDLE: 'true' },
  };
}

export interface Instance {
  name: string;
  readonly port: number;
  /** Its own endpoint, bypassing the proxy. */
  readonly url: string;
  readonly pid: number;
  readonly alive: boolean;
  /** Everything the process printed, over all its runs. */
  readonly output: string;
  /** What the current (or last) run printed. */
  readonly runOutput: string;
  /** How many times it was started. */
  readonly runs: number;
  /** The exit code of the last run, once it exited by itself (`null` while it runs, or when a signal ended it). */
  readonly exitCode: number | null;
  start(): Promise<void>;
  /** SIGKILL (a crash) or SIGTERM (a graceful shutdown); resolves when the process has exited. */
  stop(signal?: 'SIGKILL' | 'SIGTERM'): Promise<void>;
  /** Sent SIGTERM (a graceful stop) and not started again since. */
  readonly stopping: boolean;
  /** Resolves with the match once the current run's output matches `pattern` (already, or later). */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
}

/**
 * One instance of `app` on `port`, named `name` (its INSTANCE_NAME, so its `x-served-by`). `start()`
 * resolves once it logged its `MCP at http://…:<port>/mcp` line, i.e. it has joined the cluster and
 * listens. next-example creates its handler at its first request, so for it `start()` sends one.
 */
export function instance(name: string, port: number, env: Record<string, string>, app: ExampleAppName = 'express-example'): Instance {
  let current = port;
  // MCP_KIT_CLUSTER=shared runs a cluster suite in the other mode: no internalUrl.
  if (CLUSTER_MODE === 'shared' && (env.REDIS_URL || env.REDIS_SENTINELS || env.REDIS_CLUSTER_NODES) && env.CLUSTER === undefined)
    env = { ...env, CLUSTER: 'shared' };
  let child: ChildProcess | undefined;
  let output = '';
  let runStart = 0;
  let runs = 0;
  let stopping = false;
  const watchers = new Set<() => void>();
  const append = (d: Buffer) => {
    output += d;
    for (const w of [...watchers]) w();
  };
  /** One start on the current port; rejects if the process exits first. */
  const startOnce = async () => {
    const command = launch(app, current);
    runStart = output.length;
    const c = startProcess(`${app} ${name} 127.0.0.1:${current}`, process.execPath, command.args, {
      cwd: command.cwd,
      env: { ...process.env, ...command.env, HOST: '127.0.0.1', PORT: String(current), INSTANCE_NAME: name, ...env },
    });
    child = c;
    c.stdout?.on('data', append);
    c.stderr?.on('data', append);
    const exited = new Promise<never>((_, reject) =>
      c.once('exit', (code, signal) => reject(new Error(`${name} exited (${code ?? signal}) before listening:\n${self.runOutput}`))),
    );
    exited.catch(() => {});
    if (app === 'next-example') {
      await Promise.race([self.waitFor(/Ready in/, 15_000), exited]);
      await fetch(self.url).then((res) => res.body?.cancel());
    }
    await Promise.race([self.waitFor(new RegExp(`:${current}/mcp`), 15_000), exited]);
  };
  const self: Instance = {
    name,
    get port() {
      return current;
    },
    get url() {
      return `http://127.0.0.1:${current}/mcp`;
    },
    get pid() {
      return child?.pid ?? -1;
    },
    get alive() {
      return !!child && child.exitCode === null && child.signalCode === null;
    },
    get output() {
      return output;
    },
    get runOutput() {
      return output.slice(runStart);
    },
    get runs() {
      return runs;
    },
    get exitCode() {
      return child?.exitCode ?? null;
    },
    get stopping() {
      return stopping;
    },
    async start() {
      stopping = false;
      runs++;
      for (let attempt = 1; ; attempt++) {
        try {
          return await startOnce();
        } catch (error) {
          // Another test process (vitest runs files in parallel workers) listened on the port
          // between freePort() and this start. Only a first start moves: a restart keeps its port,
          // which a proxy in front of it knows.
          if (runs > 1 || attempt >= 3 || !/EADDRINUSE/.test(self.runOutput)) throw error;
          current = await freePort();
        }
      }
    },
    async stop(signal = 'SIGTERM') {
      const c = child;
      if (!c || c.exitCode !== null || c.signalCode !== null) return;
      const exited = new Promise((resolve) => c.once('exit', resolve));
      stopping = signal === 'SIGTERM';
      process.kill(c.pid as number, signal);
      await exited;
    },
    waitFor(pattern, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const m = self.runOutput.match(pattern);
          if (!m) return false;
          done();
          resolve(m);
          return true;
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`${name}: no ${pattern} within ${timeoutMs} ms:\n${self.runOutput.slice(-4_000)}`));
        }, timeoutMs);
        const done = () => {
          clearTimeout(timer);
          watchers.delete(watcher);
        };
        const watcher = () => void check();
        watchers.add(watcher);
        check();
      });
    },
  };
  return self;
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
  /** The backend's status, or 502 when the proxy could not get an answer (see `error`). */
  status: number;
  /** The `x-served-by` of the answer: the instance that actually served it (after any forward). */
  servedBy: string | undefined;
  /** When the proxy got the request (its body whole). */
  receivedAt: number;
  /** When the proxy got the answer's head. */
  at: number;
  /** When the answer ended (its connection to the client closed); unset while it streams. */
  endedAt?: number;
  /** Set when the proxy answered itself: why the backend gave no answer. */
  error?: string;
}

export interface RoundRobinProxy {
  url: string;
  log: ProxiedRequest[];
  /** Requests with no answer's head yet, as they would be logged now (`status` 0), for failure messages. */
  waiting(): ProxiedRequest[];
  /**
   * Resolves once no request sent to backend `index` waits for its answer's head: after `setDown`,
   * what a load balancer's deregistration delay (or a preStop hook) waits for before the platform
   * sends SIGTERM, so that no request is still on its way to the instance when its drain begins.
   */
  settled(index: number): Promise<void>;
  /** The next request of this kind (see {@link ProxiedRequest.kind}) goes to backend `index`, outside the turn. */
  steer(kind: string, index: number): void;
  /** Takes backend `index` out of the rotation (a load balancer's failed health check) or puts it back. */
  setDown(index: number, down: boolean): void;
  close(): Promise<void>;
}

/** What a request is, as a proxy's log names it (see {@link ProxiedRequest.kind}). */
export function kindOf(method: string, body: string): string {
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

// A proxy does not pass these on (RFC 9110 §7.6.1); each upstream request has its own connection.
export const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer'];

/**
 * A plain round-robin reverse proxy: each request goes to the next backend in turn, with no
 * session affinity. A backend whose connection fails before the request reached it (refused, or
 * reset by a listener that is closing) is skipped, as a load balancer does; responses, SSE
 * included, are piped through as they come. Each upstream request gets a connection of its own,
 * so a backend that shuts down never receives a request on a keep-alive socket it is closing.
 */
export async function roundRobinProxy(
  ports: number[],
  options: {
    /** Whether backend `index` is stopping gracefully (SIGTERM sent, not started again). */
    stopping?: (index: number) => boolean;
  } = {},
): Promise<RoundRobinProxy> {
  let turn = 0;
  const steered = new Map<string, number>();
  const down = new Set<number>();
  const log: ProxiedRequest[] = [];
  const waiting = new Map<() => ProxiedRequest, number>();
  let settling: Array<{ index: number; resolve: () => void }> = [];
  const answered = (pending: () => ProxiedRequest) => {
    if (!waiting.delete(pending)) return;
    const busy = new Set(waiting.values());
    settling = settling.filter((s) => (busy.has(s.index) ? true : (s.resolve(), false)));
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const receivedAt = Date.now();
      const body = Buffer.concat(chunks);
      const header = (h: IncomingHttpHeaders, name: string) => (typeof h[name] === 'string' ? (h[name] as string) : undefined);
      const headers = { ...req.headers };
      for (const h of HOP_BY_HOP) delete headers[h];
      const entry = (backend: number, status: number, servedBy: string | undefined, error?: string): ProxiedRequest => ({
        method: req.method ?? '',
        kind,
        sessionId: header(req.headers, 'mcp-session-id'),
        lastEventId: header(req.headers, 'last-event-id'),
        backend,
        status,
        servedBy,
        receivedAt,
        at: Date.now(),
        ...(error ? { error } : {}),
      });
      // Round robin; a retry goes to a backend this request has not tried yet.
      const kind = kindOf(req.method ?? '', body.toString('utf8'));
      const pinned = steered.get(kind);
      steered.delete(kind);
      const send = (tried: number[]) => {
        let backend = pinned !== undefined && tried.length === 0 ? pinned : turn++ % ports.length;
        // Past what was tried, and past what is down while something else is up.
        const skip = (i: number) => tried.includes(i) || (down.has(i) && ports.some((_, j) => !down.has(j) && !tried.includes(j)));
        for (let n = 0; n < ports.length && skip(backend); n++) backend = (backend + 1) % ports.length;
        const pending = () => entry(backend, 0, undefined);
        waiting.set(pending, backend);
        const upstream = request(
          { host: '127.0.0.1', port: ports[backend], method: req.method, path: req.url, headers, agent: false },
          (up) => {
            answered(pending);
            const seen = entry(backend, up.statusCode ?? 0, header(up.headers, 'x-served-by'));
            log.push(seen);
            res.on('close', () => (seen.endedAt = Date.now()));
            const answer = { ...up.headers };
            for (const h of HOP_BY_HOP) delete answer[h];
            res.writeHead(up.statusCode ?? 502, answer);
            up.pipe(res);
            up.on('error', () => res.destroy());
          },
        );
        upstream.on('error', (error: NodeJS.ErrnoException) => {
          answered(pending);
          // Nothing reached the backend (refused, or reset by a listener that was closing): try another.
          if (error.syscall === 'connect' && tried.length + 1 < ports.length) return send([...tried, backend]);
          // Reset before any answer: a closing listener drops a connection it had accepted but not
          // read yet (idle to Node's server.close(), or still in the kernel's backlog). A GET is sent
          // elsewhere, as load balancers do with idempotent requests; a POST only while its backend
          // stops gracefully (SIGTERM), whose example app ends no connection with a request in flight
          // until CLOSE_GRACE_MS after the drain, so the app never saw it: HAProxy's `retry-on
          // conn-failure empty-response` (before: rolling-restart failed with three tools/call POSTs
          // answered 502 ECONNRESET as node-0 closed). A killed backend's POST may have run: not retried.
          const resetBeforeAnswer =
            error.code === 'ECONNRESET' && !res.headersSent && (req.method === 'GET' || options.stopping?.(backend) === true);
          if (resetBeforeAnswer && tried.length + 1 < ports.length) return send([...tried, backend]);
          if (res.headersSent) return void res.destroy();
          log.push(entry(backend, 502, undefined, error.code ?? error.message));
          res.writeHead(502, { 'content-type': 'text/plain' });
          res.end(`proxy: ${error.message}`);
        });
        res.on('close', () => {
          answered(pending);
          upstream.destroy();
        });
        upstream.end(body);
      };
      send([]);
    });
  });
  // A load balancer keeps an idle client connection far longer than a client does (ALB 60 s,
  // nginx 75 s). With Node's default of 5 s, a client idle a few seconds (waiting out a restart)
  // finds its connections closed and opens new ones, which this busy test process accepts one per
  // event-loop iteration (see connectClient in clients.ts); and a client may send a
  // request on a connection in the instant this server closes it, which fetch fails at once
  // ("fetch failed": one rolling-restart call in a CI run; its cause was not recorded).
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    log,
    waiting: () => [...waiting.keys()].map((pending) => pending()),
    settled(index) {
      if (![...waiting.values()].includes(index)) return Promise.resolve();
      return new Promise((resolve) => settling.push({ index, resolve }));
    },
    steer(kind, index) {
      steered.set(kind, index);
    },
    setDown(index, isDown) {
      if (isDown) down.add(index);
      else down.delete(index);
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export interface TestCluster {
  redis: SuiteRedis;
  instances: Instance[];
  proxy: RoundRobinProxy;
  /** The instance named `name` (as in `x-served-by`). */
  byName(name: string): Instance;
  /** The last lines of every instance's output, for failure messages. */
  outputs(): string;
  /** Stops the proxy, every instance (SIGKILL) and Redis. */
  close(): Promise<void>;
}

/**
 * The suites' Redis ({@link startSuiteRedis}: one real redis-server, or a Redis Cluster) and
 * `count` instances of `app` (`node-0`, `node-1`, …) behind a round-robin proxy. `env` goes to
 * every instance (e.g. `HEARTBEAT_MS`, `DRAIN_MS`, `RETRY_MS`).
 */
export async function startCluster(
  count: number,
  env: Record<string, string> = {},
  app: ExampleAppName = 'express-example',
  redisOptions: Parameters<typeof startSuiteRedis>[0] = {},
): Promise<TestCluster> {
  const redis = await startSuiteRedis(redisOptions);
  const instances: Instance[] = [];
  try {
    for (let i = 0; i < count; i++) instances.push(instance(`node-${i}`, await freePort(), { ...redis.env, ...env }, app));
    await Promise.all(instances.map((i) => i.start()));
  } catch (error) {
    for (const i of instances) await i.stop('SIGKILL');
    await redis.stop();
    throw error;
  }
  const proxy = await roundRobinProxy(
    instances.map((i) => i.port),
    { stopping: (index) => instances[index]!.stopping },
  );
  return {
    redis,
    instances,
    proxy,
    byName(name) {
      const found = instances.find((i) => i.name === name);
      if (!found) throw new Error(`no instance named ${name}`);
      return found;
    },
    outputs: () => instances.map((i) => `--- ${i.name} (pid ${i.pid}) ---\n${i.output.slice(-4_000)}`).join('\n'),
    async close() {
      await proxy.close();
      for (const i of instances) await i.stop('SIGKILL');
      await redis.stop();
    },
  };
}
