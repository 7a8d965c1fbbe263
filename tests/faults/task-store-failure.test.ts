/**
 * A task store that fails (invariant: come-back-later), with the real one: a RedisTaskStore on a real
 * redis-server, reached through a proxy that fails the commands we choose, or with redis-server
 * paused (SIGSTOP) for the request. A `tasks/get` (a client's poll) waits the failure out and is
 * answered once the store reads again; `tasks/update`, `tasks/cancel` and a `tools/call`
 * whose task cannot be stored get the documented JSON-RPC 503 with Retry-After (never Express'
 * HTML 500 or Koa's text one), and the same process serves the task again once Redis answers.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { closeSSEStream } from '@mcp-kit/core';
import { RedisTaskStore } from '@mcp-kit/redis';
import { expressAdapter, koaAdapter, type ServerUnderTest } from '@mcp-kit/testbed/adapters';
import { envelope, modernRequest } from '@mcp-kit/testbed/requests';
import { modernAnswer, modernPost } from '@mcp-kit/testbed/fetch-client';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';
import { startRespFaultProxy, type RespFaultProxy } from '@mcp-kit/testbed/resp-faults';

const TASKS = 'io.modelcontextprotocol/tasks';
const withTasks = envelope({ 'io.modelcontextprotocol/clientCapabilities': { extensions: { [TASKS]: {} } } });

/** `gated`: becomes a task at once and answers when the test lets it. */
function gatedServer(gates: Array<() => void>): McpServer {
  const server = new McpServer({ name: 'tasks', version: '1.0.0' });
  server.registerTool('gated', {}, async (extra) => {
    closeSSEStream(extra, 50);
    await new Promise<void>((resolve) => gates.push(resolve));
    return { content: [{ type: 'text', text: 'released' }] };
  });
  return server;
}

let nextId = 1;
async function post(url: string, method: string, params: Record<string, unknown>) {
  const id = nextId++;
  const response = await modernPost(url, modernRequest(id, method, params, withTasks));
  return { id, response, ...(await modernAnswer(response)) };
}

/** The documented refusal of a store failure: 503, Retry-After, a JSON-RPC error echoing the id. */
function expectUnavailable(answered: Awaited<ReturnType<typeof post>>, what: string): void {
  const { id, response, status, json, answer } = answered;
  expect(status, `${what}: ${JSON.stringify(answer)}`).toBe(503);
  expect(json, what).toBe(true);
  expect(response.headers.get('retry-after'), what).toMatch(/^[1-9]\d*$/);
  expect(answer, what).toMatchObject({ jsonrpc: '2.0', id, error: { code: -32000, message: expect.stringMatching(/task store/) } });
}

async function completed(url: string, taskId: string): Promise<any> {
  for (;;) {
    const { status, answer } = await post(url, 'tasks/get', { taskId });
    expect(status, JSON.stringify(answer)).toBe(200);
    if (answer.result.status === 'completed') return answer.result;
    await new Promise((r) => setTimeout(r, 20));
  }
}

let redis: TestRedis;
let faults: RespFaultProxy;

beforeAll(async () => {
  redis = await startRedis();
  faults = await startRespFaultProxy(redis.port, 6);
});

afterAll(async () => {
  await faults?.close();
  await redis?.stop();
});

describe.each([expressAdapter, koaAdapter])('a failing Redis task store: $name', (adapter) => {
  let sut: ServerUnderTest | undefined;
  const gates: Array<() => void> = [];

  async function start(): Promise<ServerUnderTest> {
    const taskStore = new RedisTaskStore({ url: faults.url, keyPrefix: `t${nextId++}:`, commandTimeoutMs: 400, checkEveryMs: 100 });
    await taskStore.ready(5_000);
    sut = await adapter.start({ server: () => gatedServer(gates), taskStore });
    return sut;
  }

  /** Starts `gated` and returns its task id. */
  async function gatedTask(url: string): Promise<string> {
    const { status, answer } = await post(url, 'tools/call', { name: 'gated', arguments: {} });
    expect([status, answer.result?.resultType], JSON.stringify(answer)).toEqual([200, 'task']);
    return answer.result.taskId as string;
  }

  /** Fails every command `failing` accepts until the returned function is called. */
  function fail(failing: (command: string) => boolean): () => void {
    faults.failWhen = failing;
    faults.failRate = 1;
    return () => (faults.failRate = 0);
  }

  afterEach(async () => {
    faults.failRate = 0;
    for (const open of gates.splice(0)) open();
    await sut?.close();
    sut = undefined;
  });

  it('a tasks/get whose Redis reads fail waits them out and is answered once they pass; tasks/update and tasks/cancel get a JSON-RPC 503 with Retry-After', async () => {
    const { url, errors } = await start();
    const taskId = await gatedTask(url);
    // Reading the task fails: the poll is held, the read tried again (once a second), not refused
    // (the Tasks extension's client fails the whole task on an error answer).
    const failedReads = faults.failed.get('HGETALL') ?? 0;
    let heal = fail((command) => command === 'HGETALL');
    let answered = false;
    const poll = post(url, 'tasks/get', { taskId }).finally(() => (answered = true));
    while ((faults.failed.get('HGETALL') ?? 0) < failedReads + 3) await new Promise((r) => setTimeout(r, 20));
    expect(answered, 'tasks/get answered while every read failed').toBe(false);
    heal();
    const polled = await poll;
    expect([polled.status, polled.answer.result?.status], JSON.stringify(polled.answer)).toEqual([200, 'working']);
    // Writing what the client sent (update, cancel) is not held: 503, and the client sends it again.
    heal = fail((command) => command.startsWith('EVAL'));
    expectUnavailable(await post(url, 'tasks/update', { taskId, inputResponses: { q: {} } }), 'tasks/update');
    expectUnavailable(await post(url, 'tasks/cancel', { taskId }), 'tasks/cancel');
    heal();
    expect((await post(url, 'tasks/get', { taskId })).answer.result.status).toBe('working');
    gates.shift()!();
    expect((await completed(url, taskId)).result.content[0].text).toBe('released');
    expect(errors.some((e) => /task store failed during tasks\/update/.test(e.message))).toBe(true);
  });

  it('a tasks/get while redis-server is paused (SIGSTOP) is held, and answered after SIGCONT; the task then completes', async () => {
    const { url } = await start();
    const taskId = await gatedTask(url);
    const commands = faults.seen.get('HGETALL') ?? 0;
    process.kill(redis.pid, 'SIGSTOP');
    let answered = false;
    let poll: ReturnType<typeof post>;
    try {
      poll = post(url, 'tasks/get', { taskId }).finally(() => (answered = true));
      // Its read went to the paused Redis, timed out (commandTimeoutMs 400) and was sent again.
      while ((faults.seen.get('HGETALL') ?? 0) < commands + 2) await new Promise((r) => setTimeout(r, 20));
      expect(answered, 'tasks/get answered while Redis was paused').toBe(false);
    } finally {
      process.kill(redis.pid, 'SIGCONT');
    }
    const polled = await poll;
    expect([polled.status, polled.answer.result?.status], JSON.stringify(polled.answer)).toEqual([200, 'working']);
    gates.shift()!();
    expect((await completed(url, taskId)).result.content[0].text).toBe('released');
  });

  it('a tools/call whose task cannot be stored gets a JSON-RPC 503 with Retry-After, and the next call becomes a task', async () => {
    const { url, errors } = await start();
    // MULTI refused: the task's creation (MULTI, HSET, PEXPIRE, EXEC) fails at EXEC.
    const heal = fail((command) => command === 'MULTI');
    const refused = await post(url, 'tools/call', { name: 'gated', arguments: {} });
    heal();
    expectUnavailable(refused, 'tools/call');
    expect(errors.some((e) => /task store create failed/.test(e.message))).toBe(true);
    const taskId = await gatedTask(url);
    // The refused call's tool was stopped; only the new one waits at the gate.
    gates.at(-1)!();
    expect((await completed(url, taskId)).result.content[0].text).toBe('released');
  });
});
