/**
 * A forwarding cluster whose instances answer with JSON bodies (`jsonResponse`): an owner answers a
 * `tools/call` only once its tool is done, so when it dies while the tool runs, the instance that
 * forwarded the call sees the connection break after the request went out, and nothing else. It
 * must not run the call again once it restores the session (a tool body runs at most once per
 * request): the client hears a 502 that says so. With SSE answers the owner sends the answer's
 * head before the tool runs, so a connection that breaks before any head broke before the tool
 * ran, and the call is served where the session is restored.
 *
 * Two Express instances in this process on one real redis-server; the owner "dies" as a process
 * does (its connections break, it stops listening, its Redis connection drops, nothing of it is
 * ended), while its tool is left hanging.
 */
import { afterEach, beforeAll, afterAll, describe, expect, it } from 'vitest';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { startExpressNode, type ExpressNode } from '@mcp-kit/testbed/express-node';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';
import { callTool, initializeRequest, LEGACY } from '@mcp-kit/testbed/requests';

let redis: TestRedis;
let nodes: ExpressNode[] = [];

beforeAll(async () => {
  redis = await startRedis();
});

afterEach(async () => {
  for (const n of nodes) await n.close().catch(() => {});
  nodes = [];
});

afterAll(async () => {
  await redis?.stop();
});

const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': LEGACY };

/** A `work` tool whose first run hangs (its instance dies meanwhile) and whose later runs answer; `runs` counts its bodies. */
function workTool() {
  const tool = { runs: 0, started: undefined as unknown as Promise<void> };
  let started!: () => void;
  tool.started = new Promise<void>((resolve) => (started = resolve));
  const build = () => {
    const server = new McpServer({ name: 'json-owner-crash', version: '1.0.0' });
    server.registerTool('work', {}, async () => {
      tool.runs++;
      if (tool.runs === 1) {
        started();
        await new Promise(() => {});
      }
      return { content: [{ type: 'text', text: `worked (run ${tool.runs})` }] };
    });
    return server;
  };
  return { tool, build };
}

/** Two instances A and B on one Redis (forwarding), and a session initialized on A: its headers. */
async function sessionOnPair(keyPrefix: string, build: () => McpServer, jsonResponse: boolean) {
  const a = await startExpressNode({ redisUrl: redis.url, mode: 'forward', keyPrefix, server: build, jsonResponse });
  nodes.push(a);
  const b = await startExpressNode({ redisUrl: redis.url, mode: 'forward', keyPrefix, server: build, jsonResponse });
  nodes.push(b);
  const init = await fetch(a.url, { method: 'POST', headers: HEADERS, body: JSON.stringify(initializeRequest(1)) });
  const sessionId = init.headers.get('mcp-session-id')!;
  await init.text();
  return { a, b, headers: { ...HEADERS, 'mcp-session-id': sessionId } };
}

describe.each([
  { answers: 'JSON', jsonResponse: true },
  { answers: 'SSE', jsonResponse: false },
])('a forwarding cluster answering with $answers: the owner dies while its tool runs a forwarded call', ({ jsonResponse }) => {
  it('the instance that forwarded it does not run the tool again', async () => {
    const { tool, build } = workTool();
    const { a, b, headers } = await sessionOnPair(`json-owner-crash-${jsonResponse}:`, build, jsonResponse);
    const initialized = await fetch(a.url, {
      method: 'POST',
      headers,
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    });
    expect(initialized.status).toBe(202);

    const call = fetch(b.url, { method: 'POST', headers, body: JSON.stringify(callTool(2, 'work')) });
    await tool.started;
    await a.crash();
    const response = await call;
    const text = await response.text();

    expect(tool.runs).toBe(1);
    if (jsonResponse) {
      expect(response.status).toBe(502);
      expect(JSON.parse(text)).toMatchObject({ jsonrpc: '2.0', id: 2, error: { message: expect.stringContaining('not run again') } });
    } else {
      // The answer's head came from the owner before it died: the stream ends without the answer,
      // and a client that resumes hears that the instance running its call was lost.
      expect(response.status).toBe(200);
      expect(text).not.toContain('worked');
    }
  }, 30_000);
});

it('a forwarding cluster answering with JSON: an owner that crashes as it reads a forwarded call, before running it, leaves it to be served once where the session is restored', async () => {
  const { tool, build } = workTool();
  tool.runs = 1; // no run hangs: every run answers
  const { a, b, headers } = await sessionOnPair('json-owner-unread:', build, true);
  const post = (body: unknown) => fetch(b.url, { method: 'POST', headers, body: JSON.stringify(body) });
  expect((await post({ jsonrpc: '2.0', method: 'notifications/initialized' })).status).toBe(202);
  // A request forwarded to A before: B has heard A say it took one (see CoreResponder.acknowledge).
  const listed = await post({ jsonrpc: '2.0', id: 2, method: 'tools/list' });
  expect(listed.status, await listed.text()).toBe(200);

  a.crashAtNextForward();
  const response = await post(callTool(3, 'work'));
  const text = await response.text();
  // A read no more than the request's head: the call ran nowhere, so B serves it once A is gone.
  expect(response.status, text).toBe(200);
  expect(JSON.parse(text)).toMatchObject({ id: 3, result: { content: [{ type: 'text', text: 'worked (run 2)' }] } });
  expect(tool.runs).toBe(2);
}, 30_000);

it('a forwarding cluster answering with JSON: a call a draining instance hands over to a peer that dies while its tool runs is answered 502, not 503 with Retry-After, and not run again', async () => {
  const { tool, build } = workTool();
  const { a, b, headers } = await sessionOnPair('json-hand-over-crash:', build, true);
  const post = (body: unknown) => fetch(a.url, { method: 'POST', headers, body: JSON.stringify(body) });
  expect((await post({ jsonrpc: '2.0', method: 'notifications/initialized' })).status).toBe(202);
  // A drains: its idle session is handed off, and what its clients send next goes to B.
  await a.handler.drain({ deadlineMs: 5_000 });

  const call = post(callTool(2, 'work'));
  await tool.started;
  await b.crash();
  const response = await call;
  const text = await response.text();

  expect(tool.runs).toBe(1);
  // B took the call and may have run it: sent again (a 503's Retry-After invites a client or a
  // proxy to), it would run a second time wherever the session is restored.
  expect(response.status, text).toBe(502);
  expect(response.headers.get('retry-after')).toBeNull();
  expect(JSON.parse(text)).toMatchObject({ jsonrpc: '2.0', id: 2, error: { message: expect.stringContaining('not run again') } });
}, 30_000);
