/**
 * `shutdownGracefully` (`@mcp-kit/core/node`) on a real `node:http` server: a running call, an open
 * SSE stream and an idle keep-alive connection when the shutdown starts, and what each sees; then
 * the same in a child process sent a real SIGTERM, for the exit code.
 */
import { spawn } from 'node:child_process';
import { Agent, createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createMcpHandler, handleNodeRequest, type McpHandler } from '@mcp-kit/core';
import { shutdownGracefully, type GracefulShutdown, type ShutdownStep } from '@mcp-kit/core/node';

const RETRY_MS = 700;

/** A server whose `wait` tool answers once the test releases it, and says when it started. */
function gatedServer(gate: { started?: () => void; release?: () => void }): McpServer {
  const server = new McpServer({ name: 'gated', version: '1.0.0' });
  server.registerTool('wait', { description: 'answers once released' }, async () => {
    await new Promise<void>((resolve) => {
      gate.release = resolve;
      gate.started?.();
    });
    return { content: [{ type: 'text', text: 'released' }] };
  });
  return server;
}

interface Answer {
  res: IncomingMessage;
  /** The whole body, once the response has ended. */
  body: Promise<string>;
}

/** One HTTP request through `agent`; resolves with the response head, the body still arriving. */
function send(port: number, agent: Agent, method: string, headers: Record<string, string>, body?: unknown): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/mcp', method, agent, headers }, (res) => {
      res.setEncoding('utf8');
      let text = '';
      res.on('data', (chunk: string) => (text += chunk));
      const body = new Promise<string>((done, fail) => {
        res.once('end', () => done(text));
        res.once('error', fail);
      });
      resolve({ res, body });
    });
    req.once('error', reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

const json = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

/** `initialize` and `notifications/initialized`: the session id. */
async function openSession(port: number, agent: Agent): Promise<string> {
  const init = await send(port, agent, 'POST', json, {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'shutdown-test', version: '1.0.0' } },
  });
  await init.body;
  const sessionId = String(init.res.headers['mcp-session-id']);
  const headers = { ...json, 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' };
  await (
    await send(port, agent, 'POST', headers, { jsonrpc: '2.0', method: 'notifications/initialized' })
  ).body;
  return sessionId;
}

interface Running {
  server: Server;
  port: number;
  mcp: McpHandler;
}

async function start(gate: { started?: () => void; release?: () => void }): Promise<Running> {
  const mcp = createMcpHandler({ server: () => gatedServer(gate), retryMs: RETRY_MS });
  const server = createServer((req, res) => {
    // A request of the application's own that never answers: it holds its connection open.
    if (req.url === '/hang') return;
    void handleNodeRequest(mcp, req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port, mcp };
}

describe('shutdownGracefully on a node:http server', () => {
  const cleanup: Array<() => unknown> = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0)) await fn();
  });

  it('drains (the running call answers), ends the open SSE stream with retry:, closes the idle keep-alive connection and the listener, then settles with exit code 0', async () => {
    const gate: { started?: () => void; release?: () => void } = {};
    const { server, port, mcp } = await start(gate);
    cleanup.push(() => server.closeAllConnections());
    const steps: ShutdownStep[] = [];
    const shutdown: GracefulShutdown = shutdownGracefully(server, mcp, {
      signals: [],
      exit: false,
      deadlineMs: 20_000,
      graceMs: 20_000,
      onStep: (step) => steps.push(step),
    });
    cleanup.push(() => shutdown.dispose());

    // One keep-alive connection, left idle in its agent's pool after the handshake.
    const keepAlive = new Agent({ keepAlive: true, maxSockets: 1 });
    cleanup.push(() => keepAlive.destroy());
    const sessionId = await openSession(port, keepAlive);
    const idleSocket = Object.values(keepAlive.freeSockets).flat()[0]!;
    expect(idleSocket).toBeDefined();
    const idleClosed = new Promise<void>((resolve) => idleSocket.once('close', () => resolve()));

    const headers = { ...json, 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-11-25' };
    const others = new Agent({ keepAlive: true });
    cleanup.push(() => others.destroy());
    // The session's standalone SSE stream, open.
    const stream = await send(port, others, 'GET', {
      accept: 'text/event-stream',
      'mcp-session-id': sessionId,
      'mcp-protocol-version': '2025-11-25',
    });
    expect(stream.res.statusCode).toBe(200);
    // A call running in it.
    const started = new Promise<void>((resolve) => (gate.started = resolve));
    const call = await send(port, others, 'POST', headers, {
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: { name: 'wait', arguments: {} },
    });
    await started;

    const result = shutdown.shutdown('SIGTERM');
    expect(steps[0]).toEqual({ step: 'draining', reason: 'SIGTERM', deadlineMs: 20_000 });
    // While draining, the server still answers (here: a refused new session), and closes the
    // connection behind the answer.
    const late = await send(port, new Agent({ keepAlive: true }), 'POST', json, {
      jsonrpc: '2.0',
      id: 3,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'late', version: '1.0.0' } },
    });
    expect(late.res.statusCode).toBe(503);
    expect(late.res.headers.connection).toBe('close');
    await late.body;

    // Alone (no cluster), the drain waits for the running call: it answers, with its result.
    gate.release!();
    expect(await call.body).toContain('"text":"released"');

    // The open stream ends, its last field the retry hint; the idle connection is closed.
    const streamed = await stream.body;
    expect(streamed.trimEnd().split('\n').at(-1)).toBe(`retry: ${RETRY_MS}`);
    await idleClosed;

    expect(await result).toEqual({ reason: 'SIGTERM', exitCode: 0 });
    expect(await shutdown.done).toEqual({ reason: 'SIGTERM', exitCode: 0 });
    expect(steps.map((s) => s.step)).toEqual(['draining', 'drained', 'closed']);
    expect(server.listening).toBe(false);
    // Later requests find nobody listening.
    await expect(send(port, new Agent(), 'POST', json, {})).rejects.toThrow(/ECONNREFUSED/);
  });

  it('a connection still busy graceMs after the drain: the handler is closed and the connection ended', async () => {
    const { server, port, mcp } = await start({});
    cleanup.push(() => server.closeAllConnections());
    const steps: ShutdownStep[] = [];
    const shutdown = shutdownGracefully(server, mcp, {
      signals: [],
      exit: false,
      deadlineMs: 0,
      graceMs: 200,
      onStep: (s) => steps.push(s),
    });
    cleanup.push(() => shutdown.dispose());
    const hung = new Promise<string>((resolve) => {
      const req = request({ host: '127.0.0.1', port, path: '/hang', agent: new Agent({ keepAlive: true }) });
      req.once('error', (error) => resolve((error as NodeJS.ErrnoException).code ?? String(error)));
      req.end();
    });
    // Sent, and taken by the server, before the shutdown.
    await new Promise<void>((resolve) => server.once('request', () => resolve()));
    expect(await shutdown.shutdown()).toEqual({ reason: 'shutdown', exitCode: 0 });
    expect(steps.map((s) => s.step)).toEqual(['draining', 'drained', 'grace-expired', 'closed']);
    expect(await hung).toBe('ECONNRESET');
  });

  it('a step that fails is reported, the next steps still run, and the exit code is 1', async () => {
    const { server, mcp } = await start({});
    cleanup.push(() => server.closeAllConnections());
    const failing = Object.create(mcp) as McpHandler;
    failing.drain = () => Promise.reject(new Error('Redis unreachable'));
    const steps: ShutdownStep[] = [];
    let cleanedUp = false;
    const shutdown = shutdownGracefully(server, failing, {
      signals: [],
      exit: false,
      onStep: (s) => steps.push(s),
      onShutdown: () => {
        cleanedUp = true;
      },
    });
    cleanup.push(() => shutdown.dispose());
    expect((await shutdown.shutdown('SIGINT')).exitCode).toBe(1);
    expect(steps.map((s) => s.step)).toEqual(['draining', 'failed', 'closed']);
    expect(steps[1]).toMatchObject({ step: 'failed', during: 'drain', error: new Error('Redis unreachable') });
    expect(cleanedUp).toBe(true);
    expect(server.listening).toBe(false);
  });

  it('refuses a deadline or a grace that is not a whole number of ms', async () => {
    const { server, mcp } = await start({});
    cleanup.push(() => new Promise((resolve) => server.close(resolve)));
    expect(() => shutdownGracefully(server, mcp, { signals: [], deadlineMs: -1 })).toThrow(RangeError);
    expect(() => shutdownGracefully(server, mcp, { signals: [], graceMs: 1.5 })).toThrow(/graceMs/);
  });

  it('in a process sent SIGTERM with an SSE stream open: the stream ends with retry:, the process exits 0', async () => {
    const app = fileURLToPath(new URL('./shutdown-app.ts', import.meta.url));
    const child = spawn(process.execPath, ['--import', 'tsx', app], { stdio: ['ignore', 'pipe', 'pipe'] });
    cleanup.push(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    });
    let output = '';
    child.stderr.on('data', (d) => (output += d));
    const port = await new Promise<number>((resolve, reject) => {
      child.stdout.on('data', (d) => {
        output += d;
        const m = /listening on (\d+)/.exec(output);
        if (m) resolve(Number(m[1]));
      });
      child.once('exit', (code) => reject(new Error(`the app exited (${code}) before listening:\n${output}`)));
    });
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const agent = new Agent({ keepAlive: true });
    cleanup.push(() => agent.destroy());
    const sessionId = await openSession(port, agent);
    const stream = await send(port, agent, 'GET', {
      accept: 'text/event-stream',
      'mcp-session-id': sessionId,
      'mcp-protocol-version': '2025-11-25',
    });
    expect(stream.res.statusCode).toBe(200);

    child.kill('SIGTERM');
    expect((await stream.body).trimEnd().split('\n').at(-1)).toBe('retry: 400');
    expect(await exited, output).toBe(0);
    expect(output).toMatch(/step draining SIGTERM\nstep drained\nstep closed\nbye\n/);
  });
});
