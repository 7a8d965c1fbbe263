/**
 * The servers behind 2026 requests are kept per kind of client (invariant: bounded): what changes a
 * server is what the client declares it can do, not its name or version, so a client rotating
 * `clientInfo.version` cannot make the handler build a server per request and push everyone
 * else's out; and a task waiting for its client's answer outlives any eviction of its server.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { McpHandlerOptions } from '@mcp-kit/core';
import { createFixtureServer } from '@mcp-kit/fixtures';
import { inProcessAdapters, type ServerUnderTest } from '@mcp-kit/testbed/adapters';
import { registerAskName } from '@mcp-kit/testbed/probes';
import { envelope, modernRequest } from '@mcp-kit/testbed/requests';
import { modernAnswer, modernPost } from '@mcp-kit/testbed/fetch-client';

const TASKS = 'io.modelcontextprotocol/tasks';

function counted(): { built: number; factory: McpHandlerOptions['server'] } {
  const counter = {
    built: 0,
    factory: (() => {
      counter.built++;
      const server = createFixtureServer();
      registerAskName(server);
      return server as McpServer;
    }) as McpHandlerOptions['server'],
  };
  return counter;
}

async function ask(url: string, id: number, method: string, params: Record<string, unknown>, meta = envelope()) {
  const { status, answer } = await modernAnswer(await modernPost(url, modernRequest(id, method, params, meta)));
  expect(status, JSON.stringify(answer)).toBe(200);
  return answer;
}

describe.each(inProcessAdapters)('the 2026 server cache: $name', (adapter) => {
  let sut: ServerUnderTest | undefined;
  afterEach(async () => {
    await sut?.close();
    sut = undefined;
  });

  it('20 requests from one client rotating clientInfo.version are served by one server', async () => {
    const counter = counted();
    sut = await adapter.start({ server: counter.factory });
    for (let i = 0; i < 20; i++) {
      const meta = envelope({ 'io.modelcontextprotocol/clientInfo': { name: 'rotating', version: `1.0.${i}` } });
      const answer = await ask(sut.url, i + 1, 'tools/call', { name: 'test_simple_text', arguments: {} }, meta);
      expect(answer.result.content[0].type).toBe('text');
    }
    expect(counter.built).toBe(1);
  });

  it('a task waiting for its answer survives its server being pushed out by 20 other kinds of client, and completes', async () => {
    const counter = counted();
    sut = await adapter.start({ server: counter.factory, maxModernServers: 2 });
    const withTasks = envelope({ 'io.modelcontextprotocol/clientCapabilities': { elicitation: {}, extensions: { [TASKS]: {} } } });
    const task = (await ask(sut.url, 1, 'tools/call', { name: 'ask_name', arguments: {} }, withTasks)).result;
    expect(task.resultType).toBe('task');
    let waiting: any;
    for (let i = 0; !waiting; i++) {
      const got = (await ask(sut.url, 100 + i, 'tasks/get', { taskId: task.taskId }, withTasks)).result;
      if (got.status === 'input_required') waiting = got;
    }
    // Twenty other kinds of client (other capabilities) come and go.
    for (let i = 0; i < 20; i++) {
      const meta = envelope({ 'io.modelcontextprotocol/clientCapabilities': { experimental: { [`kind-${i}`]: {} } } });
      await ask(sut.url, 200 + i, 'tools/call', { name: 'test_simple_text', arguments: {} }, meta);
    }
    expect(counter.built).toBeGreaterThan(2);
    const [key] = Object.keys(waiting.inputRequests);
    await ask(
      sut.url,
      300,
      'tasks/update',
      { taskId: task.taskId, inputResponses: { [key!]: { action: 'accept', content: { name: 'Ada' } } } },
      withTasks,
    );
    let done: any;
    for (let i = 0; !done; i++) {
      const got = (await ask(sut.url, 400 + i, 'tasks/get', { taskId: task.taskId }, withTasks)).result;
      if (got.status !== 'input_required' && got.status !== 'working') done = got;
      else await new Promise((resolve) => setTimeout(resolve, 20));
      expect(i).toBeLessThan(500);
    }
    expect(done).toMatchObject({ status: 'completed', result: { content: [{ type: 'text', text: 'hello Ada' }] } });
  });
});
