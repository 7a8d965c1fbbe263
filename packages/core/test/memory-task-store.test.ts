import { describe, expect, it } from 'vitest';
import { MemoryTaskStore, TaskStoreFullError } from '@mcp-kit/core';
import { task, taskStoreContract } from './task-store-contract.js';

taskStoreContract('MemoryTaskStore', async () => new MemoryTaskStore());

describe('MemoryTaskStore limits', () => {
  it('past maxTasks the oldest finished task goes; running tasks are never evicted, a new one is refused', () => {
    const store = new MemoryTaskStore({ maxTasks: 2 });
    const a = task();
    const b = task();
    store.create(a);
    store.create(b);
    store.update(a.taskId, { status: 'completed', result: { content: [] } });
    const c = task();
    store.create(c);
    expect(store.get(a.taskId)).toBeUndefined();
    expect(store.get(b.taskId)).toBeDefined();
    expect(() => store.create(task())).toThrow(TaskStoreFullError);
    expect(store.stats().tasks).toBe(2);
  });

  it('maxBytes counts what tasks hold: a big result pushes out old finished tasks first', () => {
    const store = new MemoryTaskStore({ maxBytes: 20_000 });
    const old = task();
    store.create(old);
    store.update(old.taskId, { status: 'completed', result: { content: [{ type: 'text', text: 'x'.repeat(15_000) }] } });
    const fresh = task();
    store.create(fresh);
    store.update(fresh.taskId, { status: 'completed', result: { content: [{ type: 'text', text: 'y'.repeat(3_000) }] } });
    expect(store.stats().bytes).toBeLessThanOrEqual(20_000);
    store.create(task());
    expect(store.get(old.taskId)).toBeDefined();
    expect(() => store.create({ ...task(), statusMessage: 'z'.repeat(10_000) })).not.toThrow();
    expect(store.get(old.taskId)).toBeUndefined();
  });

  it('rejects limits that are not positive integers', () => {
    expect(() => new MemoryTaskStore({ maxTasks: 0 })).toThrow(
      new RangeError('MemoryTaskStore: maxTasks must be a positive integer, got 0'),
    );
  });
});
