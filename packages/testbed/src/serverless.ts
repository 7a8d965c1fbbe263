/**
 * A serverless platform, simulated with real processes: example-app instances in a
 * shared cluster (`CLUSTER=shared`: no `internalUrl`, no route between them, one real
 * redis-server), behind a proxy that sends each request to a random instance and freezes an
 * instance (`SIGSTOP`) whenever it has no request in flight and nothing registered with
 * `waitUntil`, as Vercel or Lambda do, and thaws it (`SIGCONT`) when it picks it again. Each
 * instance's `waitUntil` keeps its count of unsettled work in a file (`WAIT_UNTIL_FILE`); without
 * `waitUntil` an instance is frozen as soon as its last response ends, calls or not.
 *
 * Used by tests/serverless/*.test.ts and `pnpm demo:serverless`. Every process is started here and
 * stopped by its PID.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HOP_BY_HOP, instance, kindOf, type ExampleAppName, type Instance } from './cluster.js';
import { freePort } from './processes.js';
import { Rng } from './random.js';
import { startRedis, type TestRedis } from './redis.js';

export interface ServerlessOptions {
  /** One app per instance, e.g. `['next-example', 'next-example', 'express-example']`. */
  apps: ExampleAppName[];
  /** Whether instances register work with `waitUntil` (default `true`). */
  waitUntil?: boolean;
  /** Environment of every instance, on top of the simulation's own. */
  env?: Record<string, string>;
  /** Seed of the proxy's choices (printed with the figures, so a failing run can be replayed). */
  seed?: number;
  /** Called with each line of the story: which instance answered what, which were frozen. */
  story?: (line: string) => void;
  /** Picks the instance for a request instead of the dice (`undefined`: the dice). */
  route?: (request: { method: string; kind: string; lastEventId: string | undefined }) => number | undefined;
}

/** One request as the proxy saw it. */
export interface PlatformRequest {
  method: string;
  /** `initialize`, `request:<method>`, `notification:<method>`, `response`, or `-` (GET, DELETE). */
  kind: string;
  lastEventId: string | undefined;
  instance: number;
  status: number;
  /** The instance was frozen when this request came, and was thawed for it. */
  thawed: boolean;
  /** Why the proxy answered 502 itself (the instance gave no answer). */
  error?: string;
}

export interface ServerlessPlatform {
  url: string;
  redis: TestRedis;
  instances: Instance[];
  log: PlatformRequest[];
  /** Freezes and thaws per instance so far. */
  freezes: number[];
  thaws: number[];
  /** Whether instance `i` is frozen now. */
  frozen(i: number): boolean;
  /** How many sessions each instance restored from their record (its `restored session` lines). */
  restores(): number[];
  seed: number;
  outputs(): string;
  close(): Promise<void>;
}

export async function startServerless(options: ServerlessOptions): Promise<ServerlessPlatform> {
  const seed = options.seed ?? Math.floor(Math.random() * 2 ** 31);
  const rng = new Rng(seed);
  const story = options.story ?? (() => {});
  const keepAlive = options.waitUntil ?? true;
  const dir = mkdtempSync(join(tmpdir(), 'mcp-kit-serverless-'));
  const redis = await startRedis();
  const instances: Instance[] = [];
  const files: string[] = [];
  try {
    for (const [i, app] of options.apps.entries()) {
      const file = join(dir, `node-${i}.wait-until`);
      files.push(file);
      const env: Record<string, string> = {
        REDIS_URL: redis.url,
        CLUSTER: 'shared',
        STANDALONE_STREAM: '0',
        LIVE_PAGE: '0',
        ...(keepAlive ? { WAIT_UNTIL_FILE: file } : {}),
        ...options.env,
      };
      instances.push(instance(`node-${i}`, await freePort(), env, app));
    }
    await Promise.all(instances.map((i) => i.start()));
  } catch (error) {
    for (const i of instances) await i.stop('SIGKILL');
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }

  const inFlight = instances.map(() => 0);
  const isFrozen = instances.map(() => false);
  const freezes = instances.map(() => 0);
  const thaws = instances.map(() => 0);
  const watching = instances.map((): ReturnType<typeof setInterval> | undefined => undefined);
  const log: PlatformRequest[] = [];

  /** Unsettled `waitUntil` work of instance `i` (0 without waitUntil: nothing keeps it awake). */
  const pendingWork = (i: number): number => {
    if (!keepAlive) return 0;
    try {
      return Number(readFileSync(files[i]!, 'utf8')) || 0;
    } catch {
      return 0;
    }
  };
  const freeze = (i: number) => {
    if (isFrozen[i] || inFlight[i]! > 0 || !instances[i]!.alive) return;
    const pending = pendingWork(i);
    if (pending > 0) {
      // Awake for its waitUntil work; frozen once that settles (checked every 20 ms).
      watching[i] ??= setInterval(() => {
        if (inFlight[i]! > 0 || pendingWork(i) === 0) {
          clearInterval(watching[i]);
          watching[i] = undefined;
          freeze(i);
        }
      }, 20);
      return;
    }
    process.kill(instances[i]!.pid, 'SIGSTOP');
    isFrozen[i] = true;
    freezes[i]!++;
    story(`  node-${i} frozen (no request in flight, nothing in waitUntil)`);
  };
  const thaw = (i: number): boolean => {
    if (!isFrozen[i]) return false;
    process.kill(instances[i]!.pid, 'SIGCONT');
    isFrozen[i] = false;
    thaws[i]!++;
    return true;
  };

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const headers = { ...req.headers };
      for (const h of HOP_BY_HOP) delete headers[h];
      const header = (h: IncomingHttpHeaders, name: string) => (typeof h[name] === 'string' ? (h[name] as string) : undefined);
      const kind = kindOf(req.method ?? '', body.toString('utf8'));
      const dice = Math.floor(rng.next() * instances.length);
      const i = options.route?.({ method: req.method ?? '', kind, lastEventId: header(req.headers, 'last-event-id') }) ?? dice;
      inFlight[i]!++;
      const thawed = thaw(i);
      const entry: PlatformRequest = {
        method: req.method ?? '',
        kind,
        lastEventId: header(req.headers, 'last-event-id'),
        instance: i,
        status: 0,
        thawed,
      };
      log.push(entry);
      let done = false;
      const finish = () => {
        if (done) return;
        done = true;
        inFlight[i]!--;
        if (inFlight[i] === 0) freeze(i);
      };
      const upstream = request(
        { host: '127.0.0.1', port: instances[i]!.port, method: req.method, path: req.url, headers, agent: false },
        (up) => {
          entry.status = up.statusCode ?? 0;
          const what = entry.lastEventId ? `GET resume ${entry.lastEventId.slice(-6)}` : `${entry.method} ${kind}`;
          story(`${what} → node-${i}${thawed ? ' (thawed)' : ''}: ${entry.status}`);
          const answer = { ...up.headers };
          for (const h of HOP_BY_HOP) delete answer[h];
          res.writeHead(up.statusCode ?? 502, answer);
          up.pipe(res);
          up.on('error', () => res.destroy());
          up.on('close', finish);
        },
      );
      let clientGone = false;
      upstream.on('error', (error: NodeJS.ErrnoException) => {
        finish();
        // The client hung up first (the proxy let go of the upstream request): nobody to answer.
        if (clientGone && entry.status === 0) entry.status = 499;
        if (res.headersSent || clientGone) return void res.destroy();
        entry.error = error.code ?? error.message;
        entry.status = 502;
        res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(`platform: ${error.message}`);
      });
      res.on('close', () => {
        if (!res.writableFinished) clientGone = true;
        upstream.destroy();
        finish();
      });
      upstream.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  // Every instance starts idle: frozen until its first request.
  for (let i = 0; i < instances.length; i++) freeze(i);
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    redis,
    instances,
    log,
    freezes,
    thaws,
    frozen: (i) => isFrozen[i]!,
    restores: () => instances.map((inst) => (inst.output.match(/restored session/g) ?? []).length),
    seed,
    outputs: () => instances.map((i) => `--- ${i.name} (pid ${i.pid}) ---\n${i.output.slice(-4_000)}`).join('\n'),
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      for (const t of watching) clearInterval(t);
      for (let i = 0; i < instances.length; i++) {
        thaw(i);
        await instances[i]!.stop('SIGKILL');
      }
      await redis.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
