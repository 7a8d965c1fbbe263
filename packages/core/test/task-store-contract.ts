/**
 * The TaskStore contract, written once and run against every implementation (the memory store
 * here, the Redis store in @mcp-kit/redis): what the engine relies on to answer tasks/get,
 * tasks/update and tasks/cancel on any instance.
 */
import { describe, expect, it } from 'vitest';
import type { TaskRecord, TaskSignalListener, TaskStore } from '@mcp-kit/core';

let n = 0;
export function task(overrides: Partial<TaskRecord> = {}): TaskRecord {
  const now = Date.now();
  return {
    taskId: `task-${process.pid}-${++n}-${Math.random().toString(36).slice(2, 10)}`,
    principal: 'client\u0000alice',
    status: 'working',
    createdAt: now,
    lastUpdatedAt: now,
    ttlMs: 60_000,
    pollIntervalMs: 500,
    owner: 'instance-a',
    ...overrides,
  };
}

/** Records the signals a store sends, and resolves waits for them (Redis delivers them asynchronously). */
export class Signals implements TaskSignalListener {
  readonly answers: Array<[string, Record<string, unknown>]> = [];
  readonly cancels: Array<[string, string]> = [];
  private waiters: Array<() => void> = [];
  answered(taskId: string, responses: Record<string, unknown>): void {
    this.answers.push([taskId, responses]);
    this.wake();
  }
  cancelled(taskId: string, reason: string): void {
    this.cancels.push([taskId, reason]);
    this.wake();
  }
  async until(check: () => boolean, timeoutMs = 5_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!check()) {
      if (Date.now() > deadline) throw new Error('signal did not arrive');
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, 50);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }
  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }
}

export function taskStoreContract(name: string, make: () => Promise<TaskStore>): void {
  describe(`${name}: TaskStore contract`, () => {
    it('a created task is found at once, as it was stored; an unknown id is undefined', async () => {
      const store = await make();
      const t = task({ statusMessage: 'starting', ttlMs: null, tool: 'long_task' });
      await store.create(t);
      expect(await store.get(t.taskId)).toEqual(t);
      expect(await store.get('no-such-task')).toBeUndefined();
    });

    it('update changes status, message, questions, result; a terminal task no longer changes', async () => {
      const store = await make();
      const t = task();
      await store.create(t);
      const ask = {
        q1: { method: 'elicitation/create', params: { message: 'ok?', requestedSchema: { type: 'object', properties: {}, required: [] } } },
      };
      expect(await store.update(t.taskId, { status: 'input_required', inputRequests: ask })).toBe(true);
      expect(await store.get(t.taskId)).toMatchObject({ status: 'input_required', inputRequests: ask });
      expect(await store.update(t.taskId, { status: 'completed', result: { content: [], isError: false } })).toBe(true);
      const done = (await store.get(t.taskId))!;
      expect(done).toMatchObject({ status: 'completed', result: { content: [], isError: false } });
      expect(done.inputRequests).toBeUndefined();
      expect(done.lastUpdatedAt).toBeGreaterThanOrEqual(t.lastUpdatedAt);
      expect(await store.update(t.taskId, { status: 'failed', error: { code: -1, message: 'late' } })).toBe(false);
      expect((await store.get(t.taskId))!.status).toBe('completed');
      expect(await store.update('no-such-task', { statusMessage: 'x' })).toBe(false);
    });

    it('answer takes only open questions, drops them from the record at once and hands them to the owner', async () => {
      const store = await make();
      const signals = new Signals();
      await store.listen?.('instance-a', signals);
      const t = task();
      await store.create(t);
      const q = (m: string) => ({ method: 'elicitation/create', params: { message: m } });
      await store.update(t.taskId, { status: 'input_required', inputRequests: { a: q('a?'), b: q('b?') } });
      expect(await store.answer(t.taskId, { a: { action: 'accept', content: { x: 1 } }, zzz: { ignored: true } })).toBe(true);
      const after = (await store.get(t.taskId))!;
      expect(after.status).toBe('input_required');
      expect(Object.keys(after.inputRequests!)).toEqual(['b']);
      await signals.until(() => signals.answers.length === 1);
      expect(signals.answers[0]).toEqual([t.taskId, { a: { action: 'accept', content: { x: 1 } } }]);
      await store.answer(t.taskId, { b: { action: 'decline' } });
      expect(await store.get(t.taskId)).toMatchObject({ status: 'working' });
      await signals.until(() => signals.answers.length === 2);
    });

    it('cancel makes a running task cancelled and tells the owner; a finished one stays as it is', async () => {
      const store = await make();
      const signals = new Signals();
      await store.listen?.('instance-a', signals);
      const t = task();
      await store.create(t);
      expect(await store.cancel(t.taskId, 'by the client')).toBe(true);
      expect(await store.get(t.taskId)).toMatchObject({ status: 'cancelled' });
      await signals.until(() => signals.cancels.length === 1);
      expect(signals.cancels[0]![0]).toBe(t.taskId);
      const done = task();
      await store.create(done);
      await store.update(done.taskId, { status: 'completed', result: { content: [] } });
      expect(await store.cancel(done.taskId, 'late')).toBe(true);
      expect((await store.get(done.taskId))!.status).toBe('completed');
      expect(await store.cancel('no-such-task', 'x')).toBe(false);
      expect(await store.answer('no-such-task', {})).toBe(false);
    });

    it('a task is gone once its ttlMs has passed', async () => {
      const store = await make();
      const t = task({ ttlMs: 150 });
      await store.create(t);
      expect(await store.get(t.taskId)).toBeDefined();
      const deadline = Date.now() + 3_000;
      while ((await store.get(t.taskId)) !== undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(await store.get(t.taskId)).toBeUndefined();
    });
  });
}
