import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const src = (pkg: string, file = 'index') => fileURLToPath(new URL(`./packages/${pkg}/src/${file}.ts`, import.meta.url));

export default defineConfig({
  resolve: {
    // Tests run against the sources, so a change is tested without a build. Exact matches: a bare
    // `@mcp-kit/core` key would also capture `@mcp-kit/core/internal`.
    alias: [
      { find: /^@mcp-kit\/core$/, replacement: src('core') },
      { find: /^@mcp-kit\/core\/internal$/, replacement: src('core', 'internal') },
      { find: /^@mcp-kit\/core\/otel$/, replacement: src('core', 'telemetry/otel') },
      { find: /^@mcp-kit\/express$/, replacement: src('express') },
      { find: /^@mcp-kit\/fixtures$/, replacement: src('fixtures') },
      { find: /^@mcp-kit\/fixtures\/example-app$/, replacement: src('fixtures', 'example-app') },
      { find: /^@mcp-kit\/next$/, replacement: src('next') },
      { find: /^@mcp-kit\/koa$/, replacement: src('koa') },
      { find: /^@mcp-kit\/redis$/, replacement: src('redis') },
      // The testbed has no build: its package exports its sources (`@mcp-kit/testbed/<module>`).
      { find: /^@mcp-kit\/testbed\/(.+)$/, replacement: src('testbed', '$1') },
    ],
  },
  test: {
    include: ['packages/*/test/**/*.test.ts', 'tests/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    setupFiles: ['tests/support/setup.ts'],
  },
});
