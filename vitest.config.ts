import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

const src = (pkg: string) => fileURLToPath(new URL(`./packages/${pkg}/src/index.ts`, import.meta.url));

export default defineConfig({
  resolve: {
    // Tests run against the sources, so a change is tested without a build.
    alias: {
      '@mcp-kit/core': src('core'),
      '@mcp-kit/express': src('express'),
      '@mcp-kit/fixtures': src('fixtures'),
      '@mcp-kit/next': src('next'),
      '@mcp-kit/koa': src('koa'),
      '@mcp-kit/redis': src('redis'),
    },
  },
  test: {
    include: ['packages/*/test/**/*.test.ts', 'tests/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
  },
});
