// What an app gets from npm: every published package, packed with `pnpm pack` from its build,
// installed with plain npm into a scratch project outside the workspace beside the current release
// of each thing a user brings (npm's `latest`, as `npm i express` gets it: Express, Koa, Next.js,
// both SDK majors' servers, ioredis). The install must say no ERESOLVE (a peer range that excludes
// a current release: `npm i @mcp-kit/redis ioredis` warned with ioredis 6 under a `^5.4.2` peer);
// the adapters and @mcp-kit/redis take @mcp-kit/core as a peer, so the app holds exactly one copy of
// core; README.md's Express, Koa and Next code serves a real SDK client (scratch-app.mjs); and
// @mcp-kit/redis runs two instances, a call's resume served by the other one (redis-instance.mjs,
// redis-client.mjs), on the ioredis npm installs, then again after `npm i ioredis@5`. A broken
// `exports` or `dependencies` of a package fails the import of a scratch program. Needs
// `pnpm build` first (npm test builds before its tests), the npm registry, and redis-server. npm's
// cache is kept in node_modules/.cache, so a machine downloads each tarball once.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '@mcp-kit/testbed/processes';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';

const run = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const PUBLISHED = ['core', 'express', 'koa', 'next', 'redis'];
const ADAPTERS_AND_REDIS = ['@mcp-kit/express', '@mcp-kit/koa', '@mcp-kit/next', '@mcp-kit/redis'];
/** What a user installs beside the kit, each at its current release. */
const USER_BRINGS = [
  'express',
  'koa',
  'next',
  'react',
  'react-dom',
  '@modelcontextprotocol/sdk',
  '@modelcontextprotocol/server',
  'zod',
  'ioredis',
];
const SCRATCH_PROGRAMS = ['scratch-app.mjs', 'redis-instance.mjs', 'redis-client.mjs'];
const npmCache = join(root, 'node_modules', '.cache', 'packed-install-npm');
/** How npm says a peer range does not fit what it installed: `npm warn ERESOLVE overriding peer dependency`. */
const PEER_CONFLICT = /ERESOLVE|overriding peer dependency|Conflicting peer dependency/i;

/** npm and pnpm read settings from npm_config_* variables; the scratch app gets npm's defaults, not the workspace's. */
function plainEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!/^npm_|^pnpm_/i.test(key)) env[key] = value;
  // The tests' own switch to ioredis 6 (vitest.config.ts) must not reach the scratch app, which runs what npm installed.
  delete env.MCP_KIT_IOREDIS;
  env.NODE_OPTIONS = (env.NODE_OPTIONS ?? '').replace(/--import=\S*ioredis6\.mjs/, '').trim();
  return env;
}

/** `npm <args>` in the scratch app, with warnings on; resolves with what it printed (stdout and stderr). */
async function npm(args: string[]): Promise<string> {
  const { stdout, stderr } = await run('npm', [...args, '--no-audit', '--no-fund', '--loglevel=warn', '--cache', npmCache], {
    cwd: app,
    env: plainEnv(),
    maxBuffer: 16 * 1024 * 1024,
  });
  return `${stdout}${stderr}`;
}

interface Manifest {
  name: string;
  exports?: unknown;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
}

/** Every file path an `exports` map names, under any condition. */
function exportTargets(exports: unknown): string[] {
  if (typeof exports === 'string') return [exports];
  if (exports === null || typeof exports !== 'object') return [];
  return Object.values(exports).flatMap(exportTargets);
}

/** The packages (by name) that the JavaScript a package ships imports or requires, node's builtins left out. */
function importedPackages(home: string): Set<string> {
  const builtins = new Set(builtinModules);
  const names = new Set<string>();
  const files = readdirSync(home, { recursive: true, encoding: 'utf8' }).filter((f) => /\.[cm]?js$/.test(f) && !f.includes('node_modules'));
  for (const file of files) {
    const code = readFileSync(join(home, file), 'utf8');
    for (const [, specifier] of code.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*|\brequire\s*\(\s*)["']([^"'./][^"']*)["']/g)) {
      if (specifier!.startsWith('node:') || builtins.has(specifier!)) continue;
      const parts = specifier!.split('/');
      names.add(specifier!.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!);
    }
  }
  return names;
}

const installed = (name: string): string =>
  (JSON.parse(readFileSync(join(app, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;

let dir: string;
let app: string;
let installOutput: string;
let redis: TestRedis;

beforeAll(async () => {
  for (const pkg of PUBLISHED)
    if (!existsSync(join(root, 'packages', pkg, 'dist', 'index.js')))
      throw new Error(`packages/${pkg}/dist is missing: run \`npx -y pnpm@10.34.9 build\` first`);
  redis = await startRedis();
  dir = mkdtempSync(join(tmpdir(), 'mcp-kit-packed-'));
  const tarballs = join(dir, 'tarballs');
  app = join(dir, 'app');
  mkdirSync(app);
  // pnpm pack writes each `workspace:` range as the range it publishes (`0.x`, `^0.1.0`).
  await run(
    'npx',
    ['-y', 'pnpm@10.34.9', '-r', ...PUBLISHED.flatMap((p) => ['--filter', `@mcp-kit/${p}`]), 'pack', '--pack-destination', tarballs],
    { cwd: root, env: plainEnv() },
  );
  const packed = readdirSync(tarballs);
  const tarball = (pkg: string) => {
    const file = packed.find((f) => f.startsWith(`mcp-kit-${pkg}-`) && f.endsWith('.tgz'));
    if (!file) throw new Error(`no tarball for @mcp-kit/${pkg} among ${packed.join(', ')}`);
    return join(tarballs, file);
  };
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'scratch-app', private: true, type: 'module' }, null, 2));
  for (const program of SCRATCH_PROGRAMS) copyFileSync(join(here, program), join(app, program));
  mkdirSync(npmCache, { recursive: true });
  // As a user adds them: `npm i <the kit's packages> express … ioredis`, each name at its current release.
  installOutput = await npm(['install', ...PUBLISHED.map(tarball), ...USER_BRINGS]);
}, 300_000);

// The scratch app holds Next.js and its dependencies: removing them took over 30 s (the default
// hook timeout) in a fresh clone's npm test, four lanes on two cores.
afterAll(async () => {
  await redis?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
}, 180_000);

/** One instance (redis-instance.mjs) of the scratch app; resolves once it listens, with what it said. */
async function startInstance(name: string, started: ChildProcess[]): Promise<{ url: string; ioredis: string }> {
  const port = await freePort();
  const child = spawn(process.execPath, ['redis-instance.mjs'], {
    cwd: app,
    env: { ...plainEnv(), PORT: String(port), INSTANCE_NAME: name, REDIS_URL: redis.url },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.push(child);
  let output = '';
  return new Promise((resolve, reject) => {
    child.stderr!.on('data', (d: Buffer) => (output += d));
    child.stdout!.on('data', (d: Buffer) => {
      output += d;
      const line = output.split('\n').find((l) => l.startsWith('{"listening"'));
      if (line) resolve({ url: `http://127.0.0.1:${port}/mcp`, ioredis: (JSON.parse(line) as { ioredis: string }).ioredis });
    });
    child.once('exit', (code) => reject(new Error(`instance ${name} exited (${code}) before listening:\n${output}`)));
  });
}

/** Two instances on one Redis; the SDK v1 client's POSTs go to A, its resumes to B. */
async function twoInstancesOneCall() {
  const started: ChildProcess[] = [];
  try {
    const [a, b] = await Promise.all([startInstance('A', started), startInstance('B', started)]);
    const { stdout } = await run('node', ['redis-client.mjs', a.url, b.url], { cwd: app, env: plainEnv(), timeout: 30_000 });
    const call = JSON.parse(stdout.trim().split('\n').at(-1)!) as {
      text: string;
      logs: string[];
      served: Array<{ method: string; rpc?: string; resume: boolean; by: string }>;
    };
    return { ioredis: [a.ioredis, b.ioredis], call };
  } finally {
    await Promise.all(
      started.map(async (child) => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const exited = new Promise((resolve) => child.once('exit', resolve));
        process.kill(child.pid!, 'SIGTERM');
        await exited;
      }),
    );
  }
}

/** What twoInstancesOneCall must show on any ioredis: the call ran on A, was resumed on B and completed there. */
function expectResumedOnTheOtherInstance(call: Awaited<ReturnType<typeof twoInstancesOneCall>>['call']): void {
  expect(call.text).toBe('report for May, from A');
  expect(call.logs).toEqual(['started on A', 'still on A']);
  expect(call.served.find((s) => s.rpc === 'tools/call')?.by).toBe('A');
  const resumes = call.served.filter((s) => s.resume);
  expect(resumes.length).toBeGreaterThan(0);
  expect(resumes.map((s) => s.by)).toEqual(resumes.map(() => 'B'));
}

describe('the packed packages installed with npm beside the current releases', () => {
  it('install with no peer-dependency conflict (npm says no ERESOLVE)', () => {
    expect(installOutput).not.toMatch(PEER_CONFLICT);
    // What this run tested against, in the test's output.
    console.log(`[packed-install] installed: ${USER_BRINGS.map((name) => `${name}@${installed(name)}`).join(', ')}`);
  });

  it('hold one @mcp-kit/core, which every adapter and @mcp-kit/redis use as a peer', async () => {
    // `npm ls` exits non-zero on a missing or invalid peer, so this also checks the published ranges.
    const { stdout: tree } = await run('npm', ['ls', '--all', '--cache', npmCache], { cwd: app, env: plainEnv() });
    const copies = tree.split('\n').filter((line) => /@mcp-kit\/core@/.test(line) && !/deduped/.test(line));
    expect(copies).toHaveLength(1);
    const { stdout: paths } = await run('npm', ['ls', '--all', '--parseable', '--cache', npmCache], { cwd: app, env: plainEnv() });
    const found = paths.split('\n').filter((p) => /[\\/]node_modules[\\/]@mcp-kit[\\/]core$/.test(p));
    expect(found).toEqual([join(app, 'node_modules', '@mcp-kit', 'core')]);
    for (const pkg of ADAPTERS_AND_REDIS) {
      const manifest = JSON.parse(readFileSync(join(app, 'node_modules', pkg, 'package.json'), 'utf8'));
      expect(manifest.dependencies?.['@mcp-kit/core'], pkg).toBeUndefined();
      expect(manifest.peerDependencies['@mcp-kit/core'], pkg).toBe('0.x');
      expect(existsSync(join(app, 'node_modules', pkg, 'node_modules', '@mcp-kit', 'core')), pkg).toBe(false);
    }
  });

  it("each package's `exports` name files its tarball holds, and its code imports only what its `dependencies` and `peerDependencies` declare", () => {
    for (const pkg of PUBLISHED.map((p) => `@mcp-kit/${p}`)) {
      const home = join(app, 'node_modules', pkg);
      const manifest = JSON.parse(readFileSync(join(home, 'package.json'), 'utf8')) as Manifest;
      const missing = exportTargets(manifest.exports).filter((target) => !existsSync(join(home, target)));
      expect(missing, `${pkg}: exports naming no file`).toEqual([]);
      const declared = new Set([
        manifest.name,
        ...Object.keys(manifest.dependencies ?? {}),
        ...Object.keys(manifest.peerDependencies ?? {}),
        ...Object.keys(manifest.optionalDependencies ?? {}),
      ]);
      // npm installs what another package depends on beside it too: an undeclared import would still load here, and fail elsewhere.
      const undeclared = [...importedPackages(home)].filter((name) => !declared.has(name));
      expect(undeclared, `${pkg}: imported but not declared`).toEqual([]);
    }
  });

  it("run README.md's code: an SDK client's call through Express, Koa and Next with the one core, and an SDK v1 server", async () => {
    const { stdout } = await run('node', ['scratch-app.mjs'], { cwd: app, env: plainEnv(), timeout: 60_000 });
    const report = JSON.parse(stdout.trim().split('\n').at(-1)!);
    expect(report.calls).toEqual(
      ['express', 'koa', 'next', 'express, SDK v1 server'].map((via) => ({ via, tools: ['report'], text: `report for ${via}` })),
    );
    const core = join(app, 'node_modules', '@mcp-kit', 'core', 'dist', 'index.cjs');
    expect(report.coreResolvedFrom).toEqual(Object.fromEntries([...ADAPTERS_AND_REDIS, 'app'].map((k) => [k, core])));
    expect(report.redisExport).toBe('function');
  });

  it("@mcp-kit/redis on ioredis 6: two instances, an SDK v1 client's call that closes its stream resumed on the other one", async () => {
    expect(installed('ioredis')).toMatch(/^6\./);
    const { ioredis, call } = await twoInstancesOneCall();
    expect(ioredis).toEqual([installed('ioredis'), installed('ioredis')]);
    expectResumedOnTheOtherInstance(call);
  });

  it('@mcp-kit/redis on ioredis 5: `npm i ioredis@5` with no ERESOLVE, then the same', async () => {
    expect(await npm(['install', 'ioredis@5'])).not.toMatch(PEER_CONFLICT);
    expect(installed('ioredis')).toMatch(/^5\./);
    const { ioredis, call } = await twoInstancesOneCall();
    expect(ioredis).toEqual([installed('ioredis'), installed('ioredis')]);
    expectResumedOnTheOtherInstance(call);
  }, 120_000);
});
