/**
 * On a platform that freezes an idle instance, a 2025 call whose stream the tool closed
 * (`closeSSEStream`) keeps running only if the instance registered it with `waitUntil`. Without,
 * the instance is frozen mid-call; its client, resuming on another instance, is told the call was
 * lost (the documented error, LOST_CALL in packages/core/src/cluster/lost-calls.ts) within a few
 * heartbeats, never left to hang. With it, the same call completes. Every resume is sent to an
 * instance other than the one running the call, so only `waitUntil` decides.
 */
import { afterEach, expect, it } from 'vitest';
import { connectClient } from '@mcp-kit/testbed/clients';
import { oneTo } from '@mcp-kit/testbed/long-task';
import { startServerless, type ServerlessPlatform } from '@mcp-kit/testbed/serverless';

const LOST_CALL = 'Internal error: the server instance running this request was lost before it answered; send the request again';
const TASK = { steps: 6, intervalMs: 150, closeEvery: 2, retryMs: 100 };

let platform: ServerlessPlatform | undefined;
afterEach(async () => {
  await platform?.close();
  platform = undefined;
});

/** Calls run on node-0 (everything but resumes goes there); resumes go to node-1 and node-2 in turn. */
async function frozenPlatform(waitUntil: boolean): Promise<ServerlessPlatform> {
  let turn = 0;
  return startServerless({
    apps: ['express-example', 'express-example', 'express-example'],
    waitUntil,
    env: { HEARTBEAT_MS: '300', RETRY_MS: '100' },
    route: ({ lastEventId }) => (lastEventId ? 1 + (turn++ % 2) : 0),
  });
}

it('without waitUntil: the instance is frozen mid-call, and its client hears the lost-call error from another instance', async () => {
  platform = await frozenPlatform(false);
  const client = await connectClient(platform.url, 'no-wait-until');
  const started = Date.now();
  const error = await client.callLongTask(TASK, { timeoutMs: 30_000 }).then(
    (result) => new Error(`the call completed: ${JSON.stringify(result)}`),
    (e: Error) => e,
  );
  const tookMs = Date.now() - started;
  expect(error.message).toContain(LOST_CALL);
  // Frozen right after its first close (step 2): nothing after it was heard, and the error came
  // from the heartbeat window (3 × 300 ms) and one check, far from the client's 30 s timeout.
  expect(client.steps).toEqual([1, 2]);
  expect(tookMs).toBeLessThan(10_000);
  expect(platform.freezes[0]).toBeGreaterThan(0);
  expect(platform.frozen(0)).toBe(true);
  await client.close();
}, 60_000);

it('with waitUntil: the same call keeps its instance awake and completes, every step once and in order', async () => {
  platform = await frozenPlatform(true);
  const client = await connectClient(platform.url, 'wait-until');
  const result = await client.callLongTask(TASK, { timeoutMs: 30_000 });
  expect(result.content).toEqual([{ type: 'text', text: 'completed 6 steps' }]);
  expect(client.steps).toEqual(oneTo(6));
  // Resumed twice or more, always on another instance than the one running the call.
  const resumes = platform.log.filter((r) => r.lastEventId);
  expect(resumes.length).toBeGreaterThan(0);
  expect(resumes.every((r) => r.instance !== 0 && r.status === 200)).toBe(true);
  await client.close();
}, 60_000);
