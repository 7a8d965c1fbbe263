/** RedisTaskStore against a real redis-server: the TaskStore contract the memory store passes. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisTaskStore } from '@mcp-kit/redis';
import { Signals, task, taskStoreContract } from '../../core/test/task-store-contract.js';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';

let redis: TestRedis;
const stores: RedisTaskStore[] = [];

beforeAll(async () => {
  redis = await startRedis();
});

afterAll(async () => {
  for (const s of stores) await s.close();
  await redis?.stop();
});

async function makeStore(options: { checkEveryMs?: number } = {}): Promise<RedisTaskStore> {
  const store = new RedisTaskStore({ url: redis.url, ...options });
  stores.push(store);
  await store.ready(5_000);
  return store;
}

taskStoreContract('RedisTaskStore', () => makeStore());

describe('RedisTaskStore across instances', () => {
  it('an answer or cancel given on one instance reaches the owner on another', async () => {
    const owner = await makeStore();
    const other = await makeStore();
    const signals = new Signals();
    await owner.listen('owner-1', signals);
    const t = task({ owner: 'owner-1' });
    await owner.create(t);
    await owner.update(t.taskId, {
      status: 'input_required',
      inputRequests: { k: { method: 'elicitation/create', params: { message: '?' } } },
    });
    await other.answer(t.taskId, { k: { action: 'accept', content: { ok: true } } });
    await signals.until(() => signals.answers.length === 1);
    expect(signals.answers[0]).toEqual([t.taskId, { k: { action: 'accept', content: { ok: true } } }]);
    await other.cancel(t.taskId, 'by the client');
    await signals.until(() => signals.cancels.length === 1);
    expect((await other.get(t.taskId))!.status).toBe('cancelled');
  });

  it('an answer published while the owner was not listening arrives with its next check', async () => {
    const owner = await makeStore({ checkEveryMs: 100 });
    const other = await makeStore();
    const t = task({ owner: 'owner-2' });
    await owner.create(t);
    await owner.update(t.taskId, { status: 'input_required', inputRequests: { k: { method: 'roots/list' } } });
    await other.answer(t.taskId, { k: { roots: [] } });
    const signals = new Signals();
    await owner.listen('owner-2', signals);
    await signals.until(() => signals.answers.length === 1);
    expect(signals.answers[0]![1]).toEqual({ k: { roots: [] } });
  });
});
