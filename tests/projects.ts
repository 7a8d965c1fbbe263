/**
 * The vitest projects, by what a test file needs of the machine (vitest.config.ts builds them from
 * these lists; tests/projects.test.ts checks that every test file is in exactly one):
 *
 * - `unit`: nothing but Node and the installed dependencies (the sources, through vitest's
 *   aliases): no build, no redis-server, no Python, no Chromium. A test there that starts a process
 *   fails (the testbed refuses it). `pnpm test:unit` runs it.
 * - `build`: the built workspace (`pnpm build`): the example apps as processes, `next start`, the
 *   packed packages, the benchmark. No Redis.
 * - `redis`: a real `redis-server` (and the build, for the example apps most of these run).
 * - `random`: the randomized suites of tests/reliability (a seed per run, printed; `LONG=1` runs
 *   them long): every adapter, `next start` included, so the build.
 *
 * A few files need more, and say so when it is missing: Python 3.10+ with venv (the Python SDK
 * client), Chromium (the live page). A new file in tests/ is in `redis` (it needs the most) until
 * it is listed here; a new file in packages/{name}/test is in `unit` until it is listed.
 */

/** Test files under tests/ that need nothing (everything else under tests/ is in `redis`, unless listed below). */
export const UNIT = [
  'tests/projects.test.ts',
  'tests/auth/fuzz.test.ts',
  'tests/auth/issuer-outage.test.ts',
  'tests/auth/resource-server.test.ts',
  'tests/auth/verifiers.test.ts',
  'tests/behaviour/cluster.test.ts',
  'tests/behaviour/drain.test.ts',
  'tests/behaviour/hibernation.test.ts',
  'tests/behaviour/lazy-servers.test.ts',
  'tests/behaviour/server-cache.test.ts',
  'tests/behaviour/tasks.test.ts',
  'tests/docs/doc-commands.test.ts',
  'tests/clients/sdk-v1-error-resume.test.ts',
  'tests/faults/tasks-drain.test.ts',
  'tests/telemetry/events.test.ts',
];

/** Test files that need the build and no Redis. */
export const BUILD = [
  'packages/bench/test/verdict.test.ts',
  'packages/next/test/next-start.test.ts',
  'tests/auth/e2e-python.test.ts',
  'tests/auth/e2e-sdk-v1.test.ts',
  'tests/auth/e2e-sdk-v2.test.ts',
  'tests/auth/hardening.test.ts',
  'tests/auth/next-start.test.ts',
  'tests/behaviour/client.test.ts',
  'tests/behaviour/modern.test.ts',
  'tests/behaviour/outlive.test.ts',
  'tests/behaviour/wire.test.ts',
  'tests/clients/eras.test.ts',
  'tests/clients/ext-tasks.test.ts',
  'tests/clients/python.test.ts',
  'tests/clients/sdk-v1.test.ts',
  'tests/clients/sdk-v2.test.ts',
  'tests/packaging/packed-install.test.ts',
  'tests/telemetry/live-page.test.ts',
  'tests/telemetry/otel.test.ts',
];

/** Test files under packages/ that need a redis-server (every other file under packages/ is `unit`, unless in BUILD). */
export const PACKAGES_REDIS = [
  'packages/fixtures/test/example-app.test.ts',
  'packages/redis/test/client-faults.test.ts',
  'packages/redis/test/cluster.test.ts',
  'packages/redis/test/eviction.test.ts',
  'packages/redis/test/fence.test.ts',
  'packages/redis/test/hop.test.ts',
  'packages/redis/test/keyspace-slots.test.ts',
  'packages/redis/test/legacy-keyspace.test.ts',
  'packages/redis/test/live-streams.test.ts',
  'packages/redis/test/quota.test.ts',
  'packages/redis/test/protocols.test.ts',
  'packages/redis/test/redis-store.test.ts',
  'packages/redis/test/redis-budget.test.ts',
  'packages/redis/test/redis-cluster.test.ts',
  'packages/redis/test/redis-task-store.test.ts',
  'packages/redis/test/sentinel.test.ts',
  'packages/redis/test/shared.test.ts',
];

/** The randomized suites. */
export const RANDOM = [
  'tests/reliability/chaos.test.ts',
  'tests/reliability/faults.test.ts',
  'tests/reliability/fuzz.test.ts',
  'tests/reliability/fuzz-modern.test.ts',
  'tests/reliability/isolation.test.ts',
  'tests/reliability/load.test.ts',
  'tests/reliability/tasks-chaos.test.ts',
];

export const PACKAGE_TESTS = 'packages/*/test/**/*.test.ts';
export const REPOSITORY_TESTS = 'tests/**/*.test.ts';

/** Each project's files, as vitest's `include` and `exclude` globs. */
export const PROJECTS = {
  unit: { include: [PACKAGE_TESTS, ...UNIT], exclude: [...BUILD, ...PACKAGES_REDIS] },
  build: { include: BUILD, exclude: [] },
  redis: { include: [REPOSITORY_TESTS, ...PACKAGES_REDIS], exclude: [...UNIT, ...BUILD, ...RANDOM] },
  random: { include: RANDOM, exclude: [] },
} as const;
