import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { configDefaults, defineConfig } from 'vitest/config';
import { PROJECTS } from './tests/projects.js';

const src = (pkg: string, file = 'index') => fileURLToPath(new URL(`./packages/${pkg}/src/${file}.ts`, import.meta.url));

/**
 * `MCP_KIT_IOREDIS=6 vitest run …` runs the tests on ioredis 6 (the root devDependency `ioredis6`)
 * instead of the 5 the workspace builds against: the sources' `import 'ioredis'` through the alias
 * below, and the processes the tests start (the built example apps) through scripts/ioredis6.mjs
 * in NODE_OPTIONS, which they inherit.
 */
const ioredis6 = process.env.MCP_KIT_IOREDIS === '6';
if (ioredis6) {
  const hook = `--import=${fileURLToPath(new URL('./scripts/ioredis6.mjs', import.meta.url))}`;
  if (!process.env.NODE_OPTIONS?.includes(hook)) process.env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ''} ${hook}`.trim();
}

/**
 * Files a run leaves to another (comma-separated): what `vitest run --exclude` would say, which
 * vitest 4 does not pass on to projects. npm test's lanes (scripts/run.mjs) set it.
 */
const laneExcludes = (process.env.MCP_KIT_TEST_EXCLUDE ?? '').split(',').filter(Boolean);

export default defineConfig({
  resolve: {
    // Tests run against the sources, so a change is tested without a build. Exact matches: a bare
    // `@mcp-kit/core` key would also capture `@mcp-kit/core/internal`.
    alias: [
      { find: /^@mcp-kit\/core$/, replacement: src('core') },
      { find: /^@mcp-kit\/core\/internal$/, replacement: src('core', 'internal') },
      { find: /^@mcp-kit\/core\/node$/, replacement: src('core', 'node') },
      { find: /^@mcp-kit\/core\/otel$/, replacement: src('core', 'telemetry/otel') },
      { find: /^@mcp-kit\/express$/, replacement: src('express') },
      { find: /^@mcp-kit\/fixtures$/, replacement: src('fixtures') },
      { find: /^@mcp-kit\/fixtures\/example-app$/, replacement: src('fixtures', 'example-app') },
      { find: /^@mcp-kit\/next$/, replacement: src('next') },
      { find: /^@mcp-kit\/next\/shutdown$/, replacement: src('next', 'shutdown') },
      { find: /^@mcp-kit\/koa$/, replacement: src('koa') },
      { find: /^@mcp-kit\/redis$/, replacement: src('redis') },
      ...(ioredis6 ? [{ find: /^ioredis$/, replacement: createRequire(import.meta.url).resolve('ioredis6') }] : []),
      // The testbed has no build: its package exports its sources (`@mcp-kit/testbed/<module>`).
      { find: /^@mcp-kit\/testbed\/(.+)$/, replacement: src('testbed', '$1') },
    ],
  },
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    setupFiles: ['tests/support/setup.ts'],
    // By what a file needs of the machine (tests/projects.ts): `vitest run --project unit` passes
    // with nothing but Node; the others check what they need before their first test.
    projects: [
      project('unit', { setupFiles: ['tests/support/unit.ts'] }),
      project('build', { globalSetup: ['tests/support/needs/build.ts'] }),
      project('redis', { globalSetup: ['tests/support/needs/build.ts', 'tests/support/needs/redis-server.ts'] }),
      project('random', { globalSetup: ['tests/support/needs/build.ts'] }),
    ],
  },
});

/** A project of the root config (aliases, timeouts, pool, setup) with its files and its needs. */
function project(name: keyof typeof PROJECTS, needs: { setupFiles?: string[]; globalSetup?: string[] }) {
  const { include, exclude } = PROJECTS[name];
  return {
    extends: true as const,
    test: { name, include: [...include], exclude: [...configDefaults.exclude, ...exclude, ...laneExcludes], ...needs },
  };
}
