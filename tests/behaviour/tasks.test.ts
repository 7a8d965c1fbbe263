/**
 * The Tasks extension (SEP-2663) for 2026-07-28 clients, on raw bytes: the same tool code that
 * SEP-1699-polls a 2025 client becomes a task a 2026 client polls.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { closeSSEStream, taskTool, type McpHandlerOptions } from '@mcp-kit/core';
import { McpServer as McpServerV2 } from '@modelcontextprotocol/server';
import { createFixtureServer } from '@mcp-kit/fixtures';
import { registerTaskToolsV1 } from '../../packages/fixtures/src/tasks/v1.js';
import { registerTaskToolsV2 } from '../../packages/fixtures/src/tasks/v2.js';
import { inProcessAdapters, type ServerUnderTest } from '@mcp-kit/testbed/adapters';
import { registerAskName } from '@mcp-kit/testbed/probes';
import { envelope, modernRequest, routingHeaders } from '@mcp-kit/testbed/requests';
import { modernAnswer, modernPost, errorOf, SseStream } from '@mcp-kit/testbed/fetch-client';

const TASKS = 'io.modelcontextprotocol/tasks';
const SUBSCRIPTION = 'io.modelcontextprotocol/subscriptionId';
const withTasks = (caps: Record<string, unknown> = {}) =>
  envelope({ 'io.modelcontextprotocol/clientCapabilities': { ...caps, extensions: { [TASKS]: {} } } });

/** Resolved, in order, each time a `slow` tool is aborted through its signal. */
const toolAborted: Array<() => void> = [];

/** The fixture plus tools that exercise each way into a task. */
function taskServer(): McpServer {
  const server = createFixtureServer();
  server.registerTool('slow', { inputSchema: { ms: z.number().int() } }, async ({ ms }, extra) => {
    closeSSEStream(extra, 120);
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(resolve, ms);
      extra.signal.addEventListener('abort', () => {
        clearTimeout(t);
        toolAborted.shift()?.();
        reject(new Error('aborted'));
      });
    });
    return { content: [{ type: 'text', text: `slept ${ms}` }] };
  });
  server.registerTool('must_be_task', { _meta: taskTool('required') }, async () => ({
    content: [{ type: 'text', text: 'ran as a task' }],
  }));
  registerAskName(server);
  return server;
}

async function call(url: string, id: number, name: string, args: Record<string, unknown>, meta = withTasks()) {
  return modernAnswer(await modernPost(url, modernRequest(id, 'tools/call', { name, arguments: args }, meta)));
}

async function taskRequest(url: string, id: number, method: string, params: Record<string, unknown>, meta = withTasks()) {
  return modernAnswer(await modernPost(url, modernRequest(id, method, params, meta)));
}

async function pollUntil(url: string, taskId: string, done: (task: any) => boolean, limitMs = 10_000): Promise<any> {
  const deadline = Date.now() + limitMs;
  for (let i = 0; ; i++) {
    const { answer } = await taskRequest(url, 1000 + i, 'tasks/get', { taskId });
    if (done(answer.result) || Date.now() > deadline) return answer.result;
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe.each(inProcessAdapters)('tasks: $name', (adapter) => {
  let sut: ServerUnderTest;
  const start = async (options: Partial<McpHandlerOptions> = {}) => {
    sut = await adapter.start({ server: () => taskServer(), ...options });
  };
  afterEach(async () => {
    await sut.close();
  });

  it('closeSSEStream turns the call into a task polled at retryMs; tasks/get returns the result once done', async () => {
    await start();
    const created = await call(sut.url, 1, 'slow', { ms: 150 });
    expect(created.answer.result).toMatchObject({ resultType: 'task', status: 'working', pollIntervalMs: 120, ttlMs: 3_600_000 });
    expect(created.answer.result.taskId).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(created.answer.result).not.toHaveProperty('task');
    const done = await pollUntil(sut.url, created.answer.result.taskId, (t) => t.status !== 'working');
    expect(done).toMatchObject({ resultType: 'complete', status: 'completed', result: { content: [{ text: 'slept 150' }] } });
  });

  it('without the extension the same call stays on its stream', async () => {
    await start();
    const { answer } = await call(sut.url, 2, 'slow', { ms: 20 }, envelope());
    expect(answer.result).toMatchObject({ resultType: 'complete', content: [{ text: 'slept 20' }] });
  });

  it('a tool marked required is a task from the start for declaring clients and -32021 for others', async () => {
    await start();
    const { answer } = await call(sut.url, 3, 'must_be_task', {});
    expect(answer.result.resultType).toBe('task');
    const done = await pollUntil(sut.url, answer.result.taskId, (t) => t.status === 'completed');
    expect(done.result.content[0].text).toBe('ran as a task');
    const e = await errorOf(await modernPost(sut.url, modernRequest(4, 'tools/call', { name: 'must_be_task', arguments: {} })));
    expect([e.status, e.code]).toEqual([400, -32021]);
    expect(e.body.error.data).toEqual({ requiredCapabilities: { extensions: { [TASKS]: {} } } });
  });

  it('tasks/cancel stops the tool and the task ends cancelled; a cancel of a finished task is a plain ack', async () => {
    await start();
    const { answer } = await call(sut.url, 5, 'slow', { ms: 60_000 });
    const taskId = answer.result.taskId;
    const stopped = new Promise<void>((resolve) => toolAborted.push(resolve));
    const ack = await taskRequest(sut.url, 6, 'tasks/cancel', { taskId });
    expect(ack.answer.result).toEqual({ resultType: 'complete' });
    // The tool, a minute from done, sees its signal abort (the test times out otherwise).
    await stopped;
    expect((await pollUntil(sut.url, taskId, () => true)).status).toBe('cancelled');
    expect((await taskRequest(sut.url, 7, 'tasks/cancel', { taskId })).answer.result).toEqual({ resultType: 'complete' });
  });

  it('an elicitation during the task moves it to input_required; tasks/update answers it and the task completes', async () => {
    await start();
    const { answer } = await call(sut.url, 8, 'ask_name', {}, withTasks({ elicitation: {} }));
    const taskId = answer.result.taskId;
    const waiting = await pollUntil(sut.url, taskId, (t) => t.status === 'input_required');
    const [key, request] = Object.entries(waiting.inputRequests)[0] as [string, any];
    expect(request).toMatchObject({ method: 'elicitation/create', params: { message: 'Your name?' } });
    const ack = await taskRequest(sut.url, 9, 'tasks/update', {
      taskId,
      inputResponses: { [key]: { action: 'accept', content: { name: 'Ada' } } },
    });
    expect(ack.answer.result).toEqual({ resultType: 'complete' });
    const done = await pollUntil(sut.url, taskId, (t) => t.status === 'completed');
    expect(done.result.content[0].text).toBe('hello Ada');
  });

  it('subscriptions/listen with taskIds streams notifications/tasks for that task only, up to completed with the result', async () => {
    // The conformance suite skips its own scenario for this (tasks-status-notifications, pending a
    // harness rewrite), so this is the test that holds the status notifications to account.
    await start();
    const asked = await call(sut.url, 40, 'ask_name', {}, withTasks({ elicitation: {} }));
    const other = await call(sut.url, 41, 'ask_name', {}, withTasks({ elicitation: {} }));
    const taskId = asked.answer.result.taskId;
    const listenRequest = modernRequest(42, 'subscriptions/listen', { notifications: { taskIds: [taskId] } }, withTasks());
    const controller = new AbortController();
    const response = await fetch(sut.url, {
      method: 'POST',
      headers: routingHeaders(listenRequest),
      body: JSON.stringify(listenRequest),
      signal: controller.signal,
    });
    expect(response.headers.get('content-type')).toContain('text/event-stream');
    const stream = new SseStream(response, controller);
    const notifications = async (until: (m: any) => boolean) =>
      (await stream.until(until)).filter((b) => b.data).map((b) => JSON.parse(b.data!));
    const [ack] = await notifications((m) => m.method === 'notifications/subscriptions/acknowledged');
    expect(ack.params).toMatchObject({ notifications: { taskIds: [taskId] }, _meta: { [SUBSCRIPTION]: 42 } });

    // The other task of the same client is answered and ends first, while the stream is open.
    const answer = async (id: string, requestId: number, name: string) => {
      const waiting = await pollUntil(sut.url, id, (t) => t.status === 'input_required');
      const [key] = Object.keys(waiting.inputRequests);
      await taskRequest(sut.url, requestId, 'tasks/update', {
        taskId: id,
        inputResponses: { [key]: { action: 'accept', content: { name } } },
      });
    };
    const otherId = other.answer.result.taskId;
    await answer(otherId, 43, 'Bob');
    expect((await pollUntil(sut.url, otherId, (t) => t.status === 'completed')).result.content[0].text).toBe('hello Bob');
    await answer(taskId, 44, 'Ada');
    const seen = await notifications((m) => m.method === 'notifications/tasks' && m.params.status === 'completed');
    expect(seen.every((m) => m.method === 'notifications/tasks' && m.params.taskId === taskId)).toBe(true);
    expect(seen.every((m) => m.params._meta[SUBSCRIPTION] === 42)).toBe(true);
    expect(seen.at(-1).params).toMatchObject({ status: 'completed', result: { content: [{ text: 'hello Ada' }] } });
    expect(seen.at(-1).params).not.toHaveProperty('resultType');
    // Nothing about the other task came on this stream, although it changed twice before this one ended.
    expect(stream.raw).not.toContain(otherId);
    stream.abort();
  });

  it('tasks of one principal are unknown to another, and unknown ids get -32602; tasks/* need the extension', async () => {
    await start();
    const { answer } = await call(sut.url, 10, 'slow', { ms: 10 });
    const e = await errorOf(await modernPost(sut.url, modernRequest(11, 'tasks/get', { taskId: 'nope-nope-nope' }, withTasks())));
    expect(e.code).toBe(-32602);
    const gate = await errorOf(await modernPost(sut.url, modernRequest(12, 'tasks/get', { taskId: answer.result.taskId })));
    expect([gate.status, gate.code]).toEqual([400, -32021]);
  });

  it('server/discover declares the extension', async () => {
    await start();
    const { answer } = await taskRequest(sut.url, 13, 'server/discover', {});
    expect(answer.result.capabilities.extensions).toEqual({ [TASKS]: {} });
  });
});

/** The conformance suite's task tools, on a server of each SDK major with nothing else. */
const majors = [
  {
    name: 'SDK v1',
    server: () => {
      const s = new McpServer({ name: 'tasks-v1', version: '1.0.0' }, { capabilities: { tools: {} } });
      registerTaskToolsV1(s);
      return s;
    },
  },
  {
    name: 'SDK v2',
    server: () => {
      const s = new McpServerV2({ name: 'tasks-v2', version: '1.0.0' }, { capabilities: { tools: {} } });
      registerTaskToolsV2(s);
      return s;
    },
  },
];

describe.each(majors)('task tools on $name', ({ server }) => {
  let sut: ServerUnderTest;
  afterEach(async () => {
    await sut.close();
  });
  const caps = { elicitation: {}, sampling: {} };

  it('failing_job completes with isError; protocol_error_job fails with the JSON-RPC error; greet never becomes a task', async () => {
    sut = await inProcessAdapters[0]!.start({ server });
    const failing = (await call(sut.url, 1, 'failing_job', {}, withTasks(caps))).answer.result;
    const protocol = (await call(sut.url, 2, 'protocol_error_job', {}, withTasks(caps))).answer.result;
    expect([failing.resultType, protocol.resultType]).toEqual(['task', 'task']);
    const f = await pollUntil(sut.url, failing.taskId, (t) => t.status !== 'working');
    expect(f).toMatchObject({ status: 'completed', result: { isError: true, content: [{ text: 'simulated failure: job crashed' }] } });
    const p = await pollUntil(sut.url, protocol.taskId, (t) => t.status !== 'working');
    expect(p).toMatchObject({ status: 'failed', error: { code: -32603, message: expect.any(String) } });
    expect(p).not.toHaveProperty('result');
    const greet = (await call(sut.url, 3, 'greet', { name: 'sep-2243' }, withTasks(caps))).answer.result;
    expect(greet).toMatchObject({ resultType: 'complete', content: [{ text: 'Hello, sep-2243!' }] });
  });

  it('slow_compute is a task with the extension, inline without; a cancel settles it cancelled', async () => {
    sut = await inProcessAdapters[0]!.start({ server });
    const inline = (await call(sut.url, 1, 'slow_compute', { seconds: 0, label: 'x' }, envelope())).answer.result;
    expect(inline.content[0].text).toBe('Computation "x" completed after 0 seconds. Result: 42.');
    const task = (await call(sut.url, 2, 'slow_compute', { seconds: 60, label: 'y' }, withTasks(caps))).answer.result;
    expect(task.status).toBe('working');
    await taskRequest(sut.url, 3, 'tasks/cancel', { taskId: task.taskId });
    expect((await pollUntil(sut.url, task.taskId, () => true)).status).toBe('cancelled');
  });

  it('confirm_delete asks, tasks/update answers, the task completes; multi_input takes its answers one at a time', async () => {
    sut = await inProcessAdapters[0]!.start({ server });
    const del = (await call(sut.url, 1, 'confirm_delete', { filename: 'a.txt' }, withTasks(caps))).answer.result;
    const asking = await pollUntil(sut.url, del.taskId, (t) => t.status === 'input_required');
    const key = Object.keys(asking.inputRequests)[0]!;
    expect(asking.inputRequests[key]).toMatchObject({ method: 'elicitation/create', params: { message: "Delete 'a.txt'?" } });
    await taskRequest(sut.url, 2, 'tasks/update', {
      taskId: del.taskId,
      inputResponses: { [key]: { action: 'accept', content: { confirm: true } } },
    });
    expect((await pollUntil(sut.url, del.taskId, (t) => t.status === 'completed')).result.content[0].text).toBe("deleted 'a.txt'");

    const multi = (await call(sut.url, 3, 'multi_input', {}, withTasks(caps))).answer.result;
    const both = await pollUntil(sut.url, multi.taskId, (t) => t.status === 'input_required' && Object.keys(t.inputRequests).length === 2);
    const [k1, k2] = Object.keys(both.inputRequests) as [string, string];
    await taskRequest(sut.url, 4, 'tasks/update', {
      taskId: multi.taskId,
      inputResponses: { [k1]: { action: 'accept', content: { name: 'partial-1', confirm: true } } },
    });
    const one = (await taskRequest(sut.url, 5, 'tasks/get', { taskId: multi.taskId })).answer.result;
    expect(one.status).toBe('input_required');
    expect(Object.keys(one.inputRequests)).toEqual([k2]);
    await taskRequest(sut.url, 6, 'tasks/update', {
      taskId: multi.taskId,
      inputResponses: { [k2]: { action: 'accept', content: { name: 'partial-2', confirm: true } } },
    });
    expect((await pollUntil(sut.url, multi.taskId, (t) => t.status === 'completed')).status).toBe('completed');
  });

  it('test_tool_with_task asks synchronously first (no task), then becomes a task with the answer', async () => {
    sut = await inProcessAdapters[0]!.start({ server });
    const meta = withTasks({ elicitation: {} });
    const first = (await call(sut.url, 1, 'test_tool_with_task', {}, meta)).answer.result;
    expect(first.resultType).toBe('input_required');
    expect(first).not.toHaveProperty('taskId');
    const key = Object.keys(first.inputRequests)[0]!;
    const body = modernRequest(
      2,
      'tools/call',
      { name: 'test_tool_with_task', arguments: {}, inputResponses: { [key]: { action: 'accept', content: { name: 'Alice' } } } },
      meta,
    );
    const second = (await modernAnswer(await modernPost(sut.url, body))).answer.result;
    expect(second.resultType).toBe('task');
    expect(second).not.toHaveProperty('requestState');
    expect((await pollUntil(sut.url, second.taskId, (t) => t.status === 'completed')).result.content[0].text).toMatch(/Alice/);
  });
});
