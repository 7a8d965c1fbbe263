/**
 * The Tasks extension (SEP-2663) for 2026-07-28 clients, on raw bytes: the same tool code that
 * SEP-1699-polls a 2025 client becomes a task a 2026 client polls.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { closeSSEStream, taskTool, type McpHandlerOptions } from '@mcp-kit/core';
import { createFixtureServer } from '@mcp-kit/fixtures';
import { inProcessAdapters, type ServerUnderTest } from '../support/adapters.js';
import { envelope, modernAnswer, modernPost, modernRequest } from '../support/modern.js';
import { errorOf } from '../support/sse.js';

const TASKS = 'io.modelcontextprotocol/tasks';
const withTasks = (caps: Record<string, unknown> = {}) =>
  envelope({ 'io.modelcontextprotocol/clientCapabilities': { ...caps, extensions: { [TASKS]: {} } } });

/** The fixture plus tools that exercise each way into a task. */
function taskServer(): McpServer {
  const server = createFixtureServer();
  server.registerTool('slow', { inputSchema: { ms: z.number().int() } }, async ({ ms }, extra) => {
    closeSSEStream(extra, 120);
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(resolve, ms);
      extra.signal.addEventListener('abort', () => {
        clearTimeout(t);
        reject(new Error('aborted'));
      });
    });
    return { content: [{ type: 'text', text: `slept ${ms}` }] };
  });
  server.registerTool('must_be_task', { _meta: taskTool('required') }, async () => ({
    content: [{ type: 'text', text: 'ran as a task' }],
  }));
  server.registerTool('ask_name', {}, async (extra) => {
    closeSSEStream(extra, 50);
    const answer = await server.server.elicitInput(
      { message: 'Your name?', requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } },
      { relatedRequestId: extra.requestId },
    );
    return { content: [{ type: 'text', text: `hello ${String(answer.content?.name)}` }] };
  });
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
    const ack = await taskRequest(sut.url, 6, 'tasks/cancel', { taskId });
    expect(ack.answer.result).toEqual({ resultType: 'complete' });
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
