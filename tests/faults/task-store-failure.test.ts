/**
 * A task store that fails (issue 20, item 6), with the real one: a RedisTaskStore on a real
 * redis-server, reached through a proxy that fails the commands we choose, or with redis-server
 * paused (SIGSTOP) for the request. Every `tasks/*` request, and a `tools/call` whose task cannot be
 * stored, must get the documented JSON-RPC 503 with Retry-After (never Express' HTML 500 or Koa's
 * text one), and the same process must serve the task again once Redis answers.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { closeSSEStream } from '@mcp-kit/core';
import { RedisTaskStore } from '@mcp-kit/redis';
import { expressAdapter, koaAdapter, type ServerUnderTest } from '../support/adapters.js';
import { envelope, modernAnswer, modernPost, modernRequest } from '../support/modern.js';
import { startRedis, type TestRedis } from '../support/redis.js';
import { startRespFaultProxy, type RespFaultProxy } from '../support/resp-faults.js';

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

  it('tasks/get, tasks/update and tasks/cancel whose Redis commands fail get a JSON-RPC 503 with Retry-After; the task is served after', async () => {
    const { url, errors } = await start();
    const taskId = await gatedTask(url);
    // Reading the task fails (tasks/get), then writing what the client sent (update, cancel).
    let heal = fail((command) => command === 'HGETALL');
    expectUnavailable(await post(url, 'tasks/get', { taskId }), 'tasks/get');
    heal();
    heal = fail((command) => command.startsWith('EVAL'));
    expectUnavailable(await post(url, 'tasks/update', { taskId, inputResponses: { q: {} } }), 'tasks/update');
    expectUnavailable(await post(url, 'tasks/cancel', { taskId }), 'tasks/cancel');
    heal();
    expect((await post(url, 'tasks/get', { taskId })).answer.result.status).toBe('working');
    gates.shift()!();
    expect((await completed(url, taskId)).result.content[0].text).toBe('released');
    expect(errors.some((e) => /task store failed during tasks\/get/.test(e.message))).toBe(true);
  });

  it('tasks/get while redis-server is paused (SIGSTOP) gets a JSON-RPC 503 with Retry-After; after SIGCONT the task is served', async () => {
    const { url } = await start();
    const taskId = await gatedTask(url);
    process.kill(redis.pid, 'SIGSTOP');
    let answered: Awaited<ReturnType<typeof post>>;
    try {
      answered = await post(url, 'tasks/get', { taskId });
    } finally {
      process.kill(redis.pid, 'SIGCONT');
    }
    expectUnavailable(answered, 'tasks/get while paused');
    // The connection that stopped answering was dropped (socketTimeout) and is made again: until
    // then a request gets 503 with Retry-After, as the client was told; then the task is served.
    const deadline = Date.now() + 5_000;
    while ((await post(url, 'tasks/get', { taskId })).status === 503) {
      expect(Date.now(), 'tasks/get still 503 5 s after SIGCONT').toBeLessThan(deadline);
      await new Promise((r) => setTimeout(r, 50));
    }
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
