/**
 * The Tasks extension when things go wrong on one instance: a drain
 * without a cluster must keep answering `tasks/*` for the tasks it waits for, and a task store
 * that fails must give the documented JSON-RPC 503 with Retry-After, never a framework's 500.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { closeSSEStream, MemoryTaskStore, type TaskStore } from '@mcp-kit/core';
import { inProcessAdapters, type ServerUnderTest } from '@mcp-kit/testbed/adapters';
import { registerAskName } from '@mcp-kit/testbed/probes';
import { envelope, modernRequest } from '@mcp-kit/testbed/requests';
import { modernAnswer, modernPost } from '@mcp-kit/testbed/fetch-client';

const TASKS = 'io.modelcontextprotocol/tasks';
const withTasks = (caps: Record<string, unknown> = {}) =>
  envelope({ 'io.modelcontextprotocol/clientCapabilities': { ...caps, extensions: { [TASKS]: {} } } });

function taskServer(gate: { release?: () => void }, pollIntervalMs = 50): McpServer {
  const server = new McpServer({ name: 'tasks', version: '1.0.0' });
  server.registerTool('gated', {}, async (extra) => {
    closeSSEStream(extra, pollIntervalMs);
    await new Promise<void>((resolve) => (gate.release = resolve));
    return { content: [{ type: 'text', text: 'released' }] };
  });
  registerAskName(server);
  return server;
}

const post = async (url: string, id: number, method: string, params: Record<string, unknown>, meta = withTasks()) => {
  const response = await modernPost(url, modernRequest(id, method, params, meta));
  return { response, ...(await modernAnswer(response)) };
};

async function pollUntil(url: string, taskId: string, done: (task: any) => boolean): Promise<any> {
  for (let i = 0; ; i++) {
    const { status, answer } = await post(url, 1000 + i, 'tasks/get', { taskId });
    expect(status, JSON.stringify(answer)).toBe(200);
    if (done(answer.result)) return answer.result;
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe.each(inProcessAdapters)('tasks while one instance drains or its store fails: $name', (adapter) => {
  let sut: ServerUnderTest | undefined;
  afterEach(async () => {
    await sut?.close();
    sut = undefined;
  });

  it('a single-instance drain answers tasks/get and tasks/update for the tasks it waits for; the result is readable after the call ends', async () => {
    const gate: { release?: () => void } = {};
    sut = await adapter.start({ server: () => taskServer(gate) });
    const running = (await post(sut.url, 1, 'tools/call', { name: 'gated', arguments: {} })).answer.result;
    const asking = (await post(sut.url, 2, 'tools/call', { name: 'ask_name', arguments: {} }, withTasks({ elicitation: {} }))).answer
      .result;
    expect([running.resultType, asking.resultType]).toEqual(['task', 'task']);
    const waiting = await pollUntil(sut.url, asking.taskId, (t) => t.status === 'input_required');

    let drained = false;
    const draining = sut.inProcess!.handler.drain({ deadlineMs: 60_000 }).then(() => (drained = true));
    // New work is refused while draining...
    const refused = await post(sut.url, 3, 'tools/call', { name: 'gated', arguments: {} });
    expect(refused.status).toBe(503);
    // ...but the tasks the drain waits for are answered.
    expect((await pollUntil(sut.url, running.taskId, () => true)).status).toBe('working');
    const [key] = Object.keys(waiting.inputRequests);
    const ack = await post(sut.url, 4, 'tasks/update', {
      taskId: asking.taskId,
      inputResponses: { [key!]: { action: 'accept', content: { name: 'Ada' } } },
    });
    expect([ack.status, ack.answer.result]).toEqual([200, { resultType: 'complete' }]);
    expect((await pollUntil(sut.url, asking.taskId, (t) => t.status === 'completed')).result.content[0].text).toBe('hello Ada');
    gate.release!();
    expect((await pollUntil(sut.url, running.taskId, (t) => t.status === 'completed')).result.content[0].text).toBe('released');
    // Both tasks ended, so the drain ends long before its deadline; the result stays readable until close.
    await draining;
    expect(drained).toBe(true);
    expect((await post(sut.url, 5, 'tasks/get', { taskId: running.taskId })).answer.result.status).toBe('completed');
  });

  it("alone with the in-process task store, a drain resolves only once the client has read its task's result", async () => {
    const POLL_MS = 300;
    const gate: { release?: () => void } = {};
    sut = await adapter.start({ server: () => taskServer(gate, POLL_MS) });
    const handler = sut.inProcess!.handler;
    const { taskId, pollIntervalMs } = (await post(sut.url, 1, 'tools/call', { name: 'gated', arguments: {} })).answer.result;
    expect(pollIntervalMs).toBe(POLL_MS);
    // The app's SIGTERM order: drain, then close (the in-process store, and the result, go with it).
    const started = Date.now();
    const shutdown = handler.drain({ deadlineMs: 20_000 }).then(() => handler.close());
    expect((await post(sut.url, 2, 'tasks/get', { taskId })).answer.result.status).toBe('working');
    gate.release!();
    // The client polls at the task's pollIntervalMs, as SDK clients do: the tool ends between polls.
    let task: any;
    for (let i = 0; task?.status !== 'completed'; i++) {
      await new Promise((r) => setTimeout(r, POLL_MS));
      const { status, answer } = await post(sut.url, 10 + i, 'tasks/get', { taskId });
      expect(status, JSON.stringify(answer)).toBe(200);
      task = answer.result;
    }
    expect(task.result.content[0].text).toBe('released');
    await shutdown;
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('a task store that fails answers tasks/update and tasks/cancel with a JSON-RPC 503 and Retry-After; a tasks/get waits it out; all serve again after', async () => {
    const gate: { release?: () => void } = {};
    const memory = new MemoryTaskStore();
    let failing = false;
    let refusedGets = 0;
    const taskStore = new Proxy(memory, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver) as unknown;
        if (typeof value !== 'function' || prop === 'create') return value;
        return (...args: unknown[]) => {
          if (!failing) return value.apply(target, args);
          if (prop === 'get') refusedGets++;
          return Promise.reject(new Error('injected task store failure'));
        };
      },
    }) as TaskStore;
    sut = await adapter.start({ server: () => taskServer(gate), taskStore });
    const { taskId } = (await post(sut.url, 1, 'tools/call', { name: 'gated', arguments: {} })).answer.result;
    failing = true;
    for (const [method, params] of [
      ['tasks/update', { taskId, inputResponses: {} }],
      ['tasks/cancel', { taskId }],
    ] as const) {
      const { response, status, answer } = await post(sut.url, 2, method, params);
      expect(status, method).toBe(503);
      expect(response.headers.get('retry-after'), method).toMatch(/^\d+$/);
      expect(answer, method).toMatchObject({ jsonrpc: '2.0', id: 2, error: { code: -32000 } });
    }
    // A poll is held while the store fails: the Tasks client fails the task on an error.
    let answered = false;
    const poll = post(sut.url, 3, 'tasks/get', { taskId }).finally(() => (answered = true));
    while (refusedGets < 3) await new Promise((r) => setTimeout(r, 20));
    expect(answered).toBe(false);
    failing = false;
    const polled = await poll;
    expect([polled.status, polled.answer.result?.status], JSON.stringify(polled.answer)).toEqual([200, 'working']);
    gate.release!();
    expect((await pollUntil(sut.url, taskId, (t) => t.status === 'completed')).result.content[0].text).toBe('released');
    expect(sut.errors.some((e) => /injected task store failure/.test(String(e.cause ?? e.message)))).toBe(true);
  });
});
