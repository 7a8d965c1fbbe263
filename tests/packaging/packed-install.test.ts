// What an app gets from npm (issue 28): the published packages, packed with `pnpm pack` from their
// builds, installed with plain npm into a scratch app beside Express, Koa and Next. The adapters and
// @mcp-kit/redis take @mcp-kit/core as a peer dependency, so the app holds exactly one copy of core
// (one McpHandler class, one closeSSEStream registry), and a real SDK client's call works through
// each adapter (scratch-app.mjs). Needs `pnpm build` first (npm test builds before its tests) and
// the npm registry for express, koa, next and the SDK; npm's cache for it is kept in
// node_modules/.cache, so only the first run of a machine downloads.
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const PUBLISHED = ['core', 'express', 'koa', 'next', 'redis'];
const ADAPTERS_AND_REDIS = ['@mcp-kit/express', '@mcp-kit/koa', '@mcp-kit/next', '@mcp-kit/redis'];
const npmCache = join(root, 'node_modules', '.cache', 'packed-install-npm');

/** npm and pnpm read settings from npm_config_* variables; the scratch app gets npm's defaults, not the workspace's. */
function plainEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!/^npm_|^pnpm_/i.test(key)) env[key] = value;
  return env;
}

/** The version the monorepo pins for `name` (root devDependencies), so the scratch app runs what the tests run. */
function pinned(name: string): string {
  const rootPkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  const benchPkg = JSON.parse(readFileSync(join(root, 'packages', 'bench', 'package.json'), 'utf8'));
  const redisPkg = JSON.parse(readFileSync(join(root, 'packages', 'redis', 'package.json'), 'utf8'));
  const version = rootPkg.devDependencies[name] ?? benchPkg.dependencies[name] ?? redisPkg.devDependencies[name];
  if (!version) throw new Error(`no pinned version of ${name} in the monorepo`);
  return version;
}

let dir: string;
let app: string;

beforeAll(async () => {
  for (const pkg of PUBLISHED)
    if (!existsSync(join(root, 'packages', pkg, 'dist', 'index.js')))
      throw new Error(`packages/${pkg}/dist is missing: run \`npx -y pnpm@10.34.9 build\` first`);
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
    return `file:../tarballs/${file}`;
  };
  const dependencies: Record<string, string> = Object.fromEntries(PUBLISHED.map((p) => [`@mcp-kit/${p}`, tarball(p)]));
  for (const name of ['express', 'koa', 'next', 'react', 'react-dom', '@modelcontextprotocol/sdk', 'zod', 'ioredis'])
    dependencies[name] = pinned(name);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'scratch-app', private: true, type: 'module', dependencies }, null, 2));
  copyFileSync(join(here, 'scratch-app.mjs'), join(app, 'scratch-app.mjs'));
  mkdirSync(npmCache, { recursive: true });
  await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', '--cache', npmCache], {
    cwd: app,
    env: plainEnv(),
  });
}, 300_000);

// The scratch app holds Next.js and its dependencies: removing them took over 30 s (the default
// hook timeout) in a fresh clone's npm test, four lanes on two cores.
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
}, 180_000);

describe('the packed packages installed with npm', () => {
  it('hold one @mcp-kit/core, which every adapter and @mcp-kit/redis use as a peer', async () => {
    // `npm ls` exits non-zero on a missing or invalid peer, so this also checks the published ranges.
    const { stdout: tree } = await run('npm', ['ls', '--all', '--cache', npmCache], { cwd: app, env: plainEnv() });
    const copies = tree.split('\n').filter((line) => /@mcp-kit\/core@/.test(line) && !/deduped/.test(line));
    expect(copies).toHaveLength(1);
    const { stdout: paths } = await run('npm', ['ls', '--all', '--parseable', '--cache', npmCache], { cwd: app, env: plainEnv() });
    const installed = paths.split('\n').filter((p) => /[\\/]node_modules[\\/]@mcp-kit[\\/]core$/.test(p));
    expect(installed).toEqual([join(app, 'node_modules', '@mcp-kit', 'core')]);
    for (const pkg of ADAPTERS_AND_REDIS) {
      const manifest = JSON.parse(readFileSync(join(app, 'node_modules', pkg, 'package.json'), 'utf8'));
      expect(manifest.dependencies?.['@mcp-kit/core'], pkg).toBeUndefined();
      expect(manifest.peerDependencies['@mcp-kit/core'], pkg).toBe('0.x');
      expect(existsSync(join(app, 'node_modules', pkg, 'node_modules', '@mcp-kit', 'core')), pkg).toBe(false);
    }
  });

  it('serve a real SDK client through Express, Koa and Next with the one core', async () => {
    const { stdout } = await run('node', ['scratch-app.mjs'], { cwd: app, env: plainEnv(), timeout: 60_000 });
    const report = JSON.parse(stdout.trim().split('\n').at(-1)!);
    expect(report.calls).toEqual(
      ['express', 'koa', 'next'].map((adapter) => ({
        adapter,
        tools: ['report'],
        text: `hello ${adapter}; stream closed: true`,
      })),
    );
    const core = join(app, 'node_modules', '@mcp-kit', 'core', 'dist', 'index.cjs');
    expect(report.coreResolvedFrom).toEqual(Object.fromEntries([...ADAPTERS_AND_REDIS, 'app'].map((k) => [k, core])));
    expect(report.redisExport).toBe('function');
  });
});
