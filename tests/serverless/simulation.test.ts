/**
 * A serverless platform, simulated (packages/testbed/src/serverless.ts). Three instances (two
 * `next start`, one express-example) in a shared cluster, no route between them, one
 * redis-server, behind a proxy that picks a random instance per request and freezes (`SIGSTOP`)
 * every instance with no request in flight and nothing in `waitUntil`. 50 clients of both eras
 * (packages/testbed/src/serverless-workload.ts): every step once and in order, every result, no 404, no 5xx.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startServerless, type ServerlessPlatform } from '@mcp-kit/testbed/serverless';
import { figures, legacyClient, taskClient } from '@mcp-kit/testbed/serverless-workload';
import { seedFor } from '@mcp-kit/testbed/random';

const LEGACY_CLIENTS = 30;
const TASK_CLIENTS = 20;

let platform: ServerlessPlatform;

beforeAll(async () => {
  platform = await startServerless({
    apps: ['next-example', 'next-example', 'express-example'],
    // A 3 s heartbeat window: four lanes of npm test on two cores once starved an instance past 900 ms
    // (HEARTBEAT_MS 300), and its running task was declared lost.
    env: { HEARTBEAT_MS: '1000', RETRY_MS: '100' },
    // The proxy's dice: `SEED=` replays a run's choice of instance per request.
    seed: seedFor('serverless simulation'),
  });
}, 60_000);

afterAll(async () => {
  await platform?.close();
});

it('50 clients of both eras on 3 instances that freeze when idle: every step once and in order, every result, no 404, no 5xx', async () => {
  const runs = await Promise.all([
    ...Array.from({ length: LEGACY_CLIENTS }, async (_, i) => {
      // Spread over ~6 s, so instances go idle (and freeze) between requests.
      await new Promise((resolve) => setTimeout(resolve, i * 200));
      return legacyClient(platform.url, `legacy-${i}`);
    }),
    ...Array.from({ length: TASK_CLIENTS }, async (_, i) => {
      await new Promise((resolve) => setTimeout(resolve, 100 + i * 300));
      return taskClient(platform.url, `tasks-${i}`);
    }),
  ]);
  console.log(figures(platform, runs));
  const failed = runs.filter((r) => r.problems.length > 0 || r.errors.length > 0);
  expect(failed, `${JSON.stringify(failed, null, 1)}\n${platform.outputs()}`).toEqual([]);
  const bad = platform.log.filter((r) => r.status === 404 || r.status >= 500);
  expect(bad, JSON.stringify(bad)).toEqual([]);
  // The platform did freeze and thaw instances, and calls were resumed on other instances.
  expect(platform.freezes.reduce((a, b) => a + b, 0)).toBeGreaterThan(platform.instances.length);
  expect(platform.thaws.reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
  expect(platform.log.filter((r) => r.lastEventId).length).toBeGreaterThanOrEqual(LEGACY_CLIENTS);
  expect(platform.restores().reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
}, 120_000);
