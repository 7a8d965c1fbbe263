/**
 * The `build`, `redis` and `chaos` projects' global setup: the workspace is built (`pnpm build`),
 * or the run fails at once, naming what is missing and how to get it — never a skip, and never two
 * hundred tests failing one by one on a missing `dist/`.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';

const root = fileURLToPath(new URL('../../../', import.meta.url));

/** What the tests of these projects run: the example apps as processes, `next start`, the packed packages. */
const BUILT = [
  'packages/core/dist/index.js',
  'packages/express/dist/index.js',
  'packages/koa/dist/index.js',
  'packages/next/dist/index.js',
  'packages/redis/dist/index.js',
  'packages/fixtures/dist/index.js',
  'apps/express-example/dist/server.js',
  'apps/koa-example/dist/server.js',
  'apps/next-example/.next/BUILD_ID',
];

export default function needsBuild(project: TestProject): void {
  const missing = BUILT.filter((file) => !existsSync(`${root}${file}`));
  if (missing.length === 0) return;
  throw new Error(
    `The ${project.name} project runs the built workspace, and ${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} missing: ` +
      'run `pnpm build` (or `npx -y pnpm@10.34.9 build`) at the repository root first. ' +
      '`pnpm test:unit` runs the tests that need no build.',
  );
}
