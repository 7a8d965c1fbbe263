/**
 * The Tasks extension (SEP-2663) across a Redis-backed cluster: built express-example instances
 * (SDK v2 fixture) sharing one redis-server. A 2026-07-28 client starts a task on instance A and
 * polls, answers and cancels it through instance B; a task whose instance dies becomes `failed`
 * with an error that names the lost instance, within the heartbeat window and one poll.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type Instance, type TestCluster } from '@mcp-kit/testbed/cluster';
import { envelope, modernRequest, routingHeaders } from '@mcp-kit/testbed/requests';
import { modernAnswer, modernPost, SseStream } from '@mcp-kit/testbed/fetch-client';

const TASKS = 'io.modelcontextprotocol/tasks';
const HEARTBEAT_MS = 500;
const RETRY_MS = 200;

let cluster: TestCluster;
let a: Instance;
let b: Instance;

beforeAll(async () => {
  cluster = await startCluster(2, { HEARTBEAT_MS: String(HEARTBEAT_MS), RETRY_MS: String(RETRY_MS), DRAIN_MS: '10000' });
  [a, b] = cluster.instances as [Instance, Instance];
}, 60_000);

afterAll(async () => {
  await cluster?.close();
});

const withTasks = envelope({
  'io.modelcontextprotocol/clientCapabilities': { elicitation: {}, extensions: { [TASKS]: {} } },
  'io.modelcontextprotocol/clientInfo': { name: 'cluster-tasks-test', version: '1.0.0' },
});

let nextId = 1;

/** A 2026 request to one instance; the answer, and which instance served it. */
async function ask(inst: Instance, method: string, params: Record<string, unknown>) {
  const res = await modernPost(inst.url, modernRequest(nextId++, method, params, withTasks));
  const servedBy = res.headers.get('x-served-by');
  const { answer, status } = await modernAnswer(res);
  return { status, servedBy, answer, result: answer.result, error: answer.error };
}

async function startTask(inst: Instance, name: string, args: Record<string, unknown>) {
  const created = await ask(inst, 'tools/call', { name, arguments: args });
  expect(created.servedBy).toBe(inst.name);
  expect(created.result, JSON.stringify(created.answer)).toMatchObject({ resultType: 'task', status: 'working' });
  return created.result as { taskId: string; pollIntervalMs: number };
}

/** Polls `tasks/get` on `inst` every `pollIntervalMs`, as a client would, until `done`; returns the task and the polls made. */
async function pollUntil(inst: Instance, taskId: string, pollIntervalMs: number, done: (task: any) => boolean, limitMs = 20_000) {
  const deadline = Date.now() + limitMs;
  for (let polls = 1; ; polls++) {
    const got = await ask(inst, 'tasks/get', { taskId });
    expect(got.servedBy).toBe(inst.name);
    expect(got.error, JSON.stringify(got.answer)).toBeUndefined();
    if (done(got.result)) return { task: got.result, polls };
    if (Date.now() > deadline) throw new Error(`task ${taskId} still ${JSON.stringify(got.result)} after ${limitMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, pollIntervalMs));
  }
}

describe('tasks across instances', () => {
  it('a task started on A completes while polled through B, at its poll interval, with the tool result', async () => {
    const task = await startTask(a, 'slow_compute', { seconds: 1, label: 'across' });
    expect(task.pollIntervalMs).toBe(RETRY_MS);
    const { task: done, polls } = await pollUntil(b, task.taskId, task.pollIntervalMs, (t) => t.status !== 'working');
    expect(done).toMatchObject({
      status: 'completed',
      result: { content: [{ type: 'text', text: 'Computation "across" completed after 1 seconds. Result: 42.' }] },
    });
    // The same answer on A, where it ran.
    expect((await ask(a, 'tasks/get', { taskId: task.taskId })).result).toMatchObject({ status: 'completed' });
    console.log(`[tasks] completed through B after ${polls} polls at ${task.pollIntervalMs} ms`);
  });

  it('a task on A that needs input is answered with tasks/update through B and completes', async () => {
    const task = await startTask(a, 'confirm_delete', { filename: 'cluster.txt' });
    const { task: waiting } = await pollUntil(b, task.taskId, task.pollIntervalMs ?? RETRY_MS, (t) => t.status === 'input_required');
    const [key, question] = Object.entries(waiting.inputRequests as Record<string, any>)[0]!;
    expect(question).toMatchObject({ method: 'elicitation/create', params: { message: "Delete 'cluster.txt'?" } });
    const ack = await ask(b, 'tasks/update', {
      taskId: task.taskId,
      inputResponses: { [key]: { action: 'accept', content: { confirm: true } } },
    });
    expect(ack.result).toEqual({ resultType: 'complete' });
    const { task: done } = await pollUntil(
      b,
      task.taskId,
      task.pollIntervalMs ?? RETRY_MS,
      (t) => t.status !== 'input_required' && t.status !== 'working',
    );
    expect(done).toMatchObject({ status: 'completed', result: { content: [{ type: 'text', text: "deleted 'cluster.txt'" }] } });
  });

  it('a task on A cancelled through B ends cancelled everywhere and stays so', async () => {
    const task = await startTask(a, 'slow_compute', { seconds: 2, label: 'cancel-me' });
    expect((await ask(b, 'tasks/get', { taskId: task.taskId })).result).toMatchObject({ status: 'working' });
    const ack = await ask(b, 'tasks/cancel', { taskId: task.taskId });
    expect(ack.result).toEqual({ resultType: 'complete' });
    for (const inst of [a, b])
      expect((await ask(inst, 'tasks/get', { taskId: task.taskId })).result).toMatchObject({ status: 'cancelled' });
    // Polled past the time the tool would have needed: nothing turned it into a result.
    const seen = new Set<string>();
    for (const until = Date.now() + 2_500; Date.now() < until;) {
      seen.add((await ask(b, 'tasks/get', { taskId: task.taskId })).result.status);
      await new Promise((resolve) => setTimeout(resolve, task.pollIntervalMs));
    }
    expect([...seen]).toEqual(['cancelled']);
  });

  it('subscriptions/listen on B with the taskId of a task running on A hears its notifications/tasks up to completed', async () => {
    const task = await startTask(a, 'confirm_delete', { filename: 'listened.txt' });
    const request = modernRequest(nextId++, 'subscriptions/listen', { notifications: { taskIds: [task.taskId] } }, withTasks);
    const controller = new AbortController();
    const response = await fetch(b.url, {
      method: 'POST',
      headers: routingHeaders(request),
      body: JSON.stringify(request),
      signal: controller.signal,
    });
    expect(response.headers.get('x-served-by')).toBe(b.name);
    const stream = new SseStream(response, controller);
    const messages = async (until: (m: any) => boolean) =>
      (await stream.until(until, 20_000)).filter((x) => x.data).map((x) => JSON.parse(x.data!));
    await messages((m) => m.method === 'notifications/subscriptions/acknowledged');
    // The task asks, is answered through B, and completes on A: B's stream hears what follows.
    const { task: waiting } = await pollUntil(b, task.taskId, task.pollIntervalMs ?? RETRY_MS, (t) => t.status === 'input_required');
    const [key] = Object.keys(waiting.inputRequests);
    await ask(b, 'tasks/update', { taskId: task.taskId, inputResponses: { [key!]: { action: 'accept', content: { confirm: true } } } });
    const seen = await messages((m) => m.method === 'notifications/tasks' && m.params.status === 'completed');
    const statuses = seen.filter((m) => m.method === 'notifications/tasks').map((m) => m.params.status);
    // It asked before the stream opened; from the answer on, B hears the changes (a quick
    // working → completed may reach it as one), up to the end, with the result.
    expect(statuses.at(-1)).toBe('completed');
    expect(seen.at(-1).params).toMatchObject({
      status: 'completed',
      result: { content: [{ type: 'text', text: "deleted 'listened.txt'" }] },
    });
    expect(seen.every((m) => m.method !== 'notifications/tasks' || m.params.taskId === task.taskId)).toBe(true);
    controller.abort();
  });

  it('A killed mid-task: polled through B the task becomes failed, naming the lost instance, within the heartbeat window and one poll', async () => {
    const instanceId = /instance ([0-9a-f-]{36})/.exec(a.runOutput)![1]!;
    const task = await startTask(a, 'slow_compute', { seconds: 60, label: 'doomed' });
    expect((await ask(b, 'tasks/get', { taskId: task.taskId })).result).toMatchObject({ status: 'working' });
    await a.stop('SIGKILL');
    const killedAt = Date.now();
    const { task: failed, polls } = await pollUntil(b, task.taskId, task.pollIntervalMs, (t) => t.status !== 'working');
    const afterMs = Date.now() - killedAt;
    expect(failed).toMatchObject({
      status: 'failed',
      error: { code: -32603, message: `the server instance running this task (${instanceId}) was lost; its work did not finish` },
    });
    expect(afterMs).toBeLessThan(3 * HEARTBEAT_MS + task.pollIntervalMs + 1_000);
    // And it stays failed, on any instance.
    await a.start();
    expect((await ask(a, 'tasks/get', { taskId: task.taskId })).result).toMatchObject({ status: 'failed' });
    console.log(
      `[tasks] failed ${afterMs} ms after the kill (heartbeat window ${3 * HEARTBEAT_MS} ms, poll ${task.pollIntervalMs} ms, ${polls} polls)`,
    );
  });

  it('A drained (SIGTERM) mid-task: the task runs to its result within the drain deadline, polled through B', async () => {
    const task = await startTask(a, 'slow_compute', { seconds: 2, label: 'deploy' });
    const stopping = a.stop('SIGTERM');
    const { task: done } = await pollUntil(b, task.taskId, task.pollIntervalMs, (t) => t.status !== 'working');
    await stopping;
    await a.start();
    expect(done).toMatchObject({
      status: 'completed',
      result: { content: [{ type: 'text', text: 'Computation "deploy" completed after 2 seconds. Result: 42.' }] },
    });
  });
});
