import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import express from 'express';
import { createMcpHandler, type McpHandler, type McpHandlerOptions } from '@mcp-kit/core';
import { mcpExpress } from '@mcp-kit/express';
import Koa from 'koa';
import { mcpKoa } from '@mcp-kit/koa';
import { createFixtureServer, FIXTURE_SDKS, fixtureServer } from '@mcp-kit/fixtures';
import { freePort, startProcess } from './processes.js';

/** Options a behaviour test may set; every adapter must honour them. */
export type HarnessOptions = Partial<McpHandlerOptions>;

export interface ServerUnderTest {
  /** The MCP endpoint. */
  url: string;
  /** Errors the handler reported through `onError` (none expected unless a test provokes them). */
  errors: Error[];
  close(): Promise<void>;
  /** In-process adapters only: the handler and the HTTP server, for tests that reach past the wire (shutdown, counts). */
  inProcess?: { handler: McpHandler; server: Server };
}

/** One way of serving the core: the behaviour suite runs against each. */
export interface Adapter {
  name: string;
  /** Runs in the test process, so options may hold functions (custom stores, callbacks). */
  inProcess: boolean;
  start(options?: HarnessOptions): Promise<ServerUnderTest>;
}

export function handlerFor(options: HarnessOptions, errors: Error[]): McpHandler {
  return createMcpHandler({
    server: () => createFixtureServer(),
    retryMs: 500,
    ...options,
    onError: (e) => {
      errors.push(e);
      options.onError?.(e);
    },
  });
}

/** Listens on 127.0.0.1 on a free port; closing ends the handler's streams and every socket. */
export async function listen(server: Server, handler: McpHandler, path: string, errors: Error[]): Promise<ServerUnderTest> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${path}`,
    errors,
    inProcess: { handler, server },
    async close() {
      await handler.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export const expressAdapter: Adapter = {
  name: 'express',
  inProcess: true,
  async start(options = {}) {
    const errors: Error[] = [];
    const handler = handlerFor(options, errors);
    const app = express();
    app.use('/mcp', mcpExpress(handler));
    return listen(createServer(app), handler, '/mcp', errors);
  },
};

export const koaAdapter: Adapter = {
  name: 'koa',
  inProcess: true,
  async start(options = {}) {
    const errors: Error[] = [];
    const handler = handlerFor(options, errors);
    const app = new Koa();
    app.use(mcpKoa(handler, { path: '/mcp' }));
    return listen(createServer(app.callback()), handler, '/mcp', errors);
  },
};

const nextApp = fileURLToPath(new URL('../../../apps/next-example/', import.meta.url));
const nextBin = fileURLToPath(new URL('../../../apps/next-example/node_modules/next/dist/bin/next', import.meta.url));

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/**
 * Next.js through a real `next start` of apps/next-example (built by `pnpm build`), with the
 * test's options passed as JSON in MCP_KIT_OPTIONS. Errors are the `[mcp-kit]` lines on stderr.
 */
export const nextAdapter: Adapter = {
  name: 'next',
  inProcess: false,
  async start(options = {}) {
    if (!existsSync(`${nextApp}.next/BUILD_ID`)) throw new Error('apps/next-example is not built: run `pnpm build` first');
    const port = await freePort();
    const child = startProcess(
      `next start (next-example) 127.0.0.1:${port}`,
      process.execPath,
      [nextBin, 'start', '-H', '127.0.0.1', '-p', String(port)],
      {
        cwd: nextApp,
        env: { ...process.env, NEXT_TELEMETRY_DISABLED: '1', RETRY_MS: '500', MCP_KIT_OPTIONS: JSON.stringify(options) },
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
    const errors: Error[] = [];
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
      for (const line of chunk.split('\n')) if (line.includes('[mcp-kit]')) errors.push(new Error(line));
    });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const deadline = Date.now() + 20_000;
    while (!(await portOpen(port))) {
      if (child.exitCode !== null) throw new Error(`next start exited (${child.exitCode}): ${stderr}`);
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`next start did not listen within 20 s: ${stderr}`);
      }
      await new Promise((r) => setTimeout(r, 25));
    }
    const url = `http://127.0.0.1:${port}/mcp`;
    // The route loads on its first request (a second or two of CPU, several under load). A
    // readiness probe asks for it before the instance takes traffic; so does this, so that no
    // test's first request is the slow one: the Python client in `auto` mode gives its
    // server/discover probe 10 s, then falls back to the 2025 handshake (it did, in a CI run).
    try {
      await routeAnswers(url, 30_000);
    } catch (error) {
      child.kill('SIGKILL');
      throw new Error(`next start did not answer on /mcp within 30 s (${(error as Error).message}): ${stderr}`);
    }
    return {
      url,
      errors,
      async close() {
        if (child.exitCode === null) child.kill('SIGTERM');
        await exited;
      },
    };
  },
};

/** Resolves once `url` answers a request at all (any status: a sessionless GET is refused). */
async function routeAnswers(url: string, timeoutMs: number): Promise<void> {
  const res = await fetch(url, { headers: { accept: 'text/event-stream' }, signal: AbortSignal.timeout(timeoutMs) });
  await res.body?.cancel();
}

export const adapters: Adapter[] = [expressAdapter, koaAdapter, nextAdapter];

/**
 * Starts for the tests of one describe block that each open sessions of their own and never stop
 * the server themselves: a server out of process (`next start`, which costs a second or two of CPU,
 * most of it loading the route on the first request) is started once per set of options and kept
 * for the next test that asks for the same ones; a lease's `close()` keeps it running, and each
 * lease starts with no errors. In-process servers cost little and start fresh for every test.
 * `closeAll()` (in afterAll) stops what was kept.
 */
export function sharedStarts(adapter: Adapter): { start(options?: HarnessOptions): Promise<ServerUnderTest>; closeAll(): Promise<void> } {
  const kept = new Map<string, Promise<ServerUnderTest>>();
  return {
    async start(options = {}) {
      if (adapter.inProcess) return adapter.start(options);
      const key = JSON.stringify(options);
      let starting = kept.get(key);
      if (!starting) {
        starting = adapter.start(options);
        kept.set(key, starting);
        starting.catch(() => kept.delete(key));
      }
      const sut = await starting;
      sut.errors.length = 0;
      return { url: sut.url, errors: sut.errors, close: async () => {} };
    },
    async closeAll() {
      const all = [...kept.values()];
      kept.clear();
      await Promise.all(all.map(async (starting) => (await starting.catch(() => undefined))?.close()));
    },
  };
}
export const inProcessAdapters: Adapter[] = adapters.filter((a) => a.inProcess);

/** A server the adapters can serve: in process through `server`, in `next start` through `env`. */
export interface Fixture {
  name: string;
  server: NonNullable<HarnessOptions['server']>;
  /** Environment for the example apps (DESIGN.md: `MCP_SDK=v1|v2` picks the fixture's SDK). */
  env: Record<string, string>;
}

/** The fixture on each SDK major, as the example apps pick it with MCP_SDK. */
export const fixtures: Fixture[] = FIXTURE_SDKS.map((sdk) => ({
  name: `sdk-${sdk} fixture`,
  server: () => fixtureServer(sdk),
  env: { MCP_SDK: sdk },
}));

/**
 * Starts `adapter` serving `fixture`. The Next adapter spawns `next start` with this process's
 * environment, so the fixture's env is set for the duration of the start (tests in one file start
 * their servers one after another) and restored after.
 */
export async function serve(adapter: Adapter, fixture: Fixture, options: HarnessOptions = {}): Promise<ServerUnderTest> {
  if (adapter.inProcess) return adapter.start({ ...options, server: fixture.server });
  const saved = Object.fromEntries(Object.keys(fixture.env).map((key) => [key, process.env[key]]));
  Object.assign(process.env, fixture.env);
  try {
    return await adapter.start(options);
  } finally {
    for (const [key, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  }
}

export const SIMPLE_TEXT = 'This is a simple text response for testing.';
