import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { freePort, startProcess } from '@mcp-kit/testbed/processes';
import { callTool, initializeRequest, LEGACY } from '@mcp-kit/testbed/requests';
import { messagesOf, readSse, sseBlocks } from '@mcp-kit/testbed/sse';

const APP = fileURLToPath(new URL('../../../apps/next-example/', import.meta.url));
const NEXT_BIN = `${APP}node_modules/next/dist/bin/next`;
const BUILT = existsSync(`${APP}.next/BUILD_ID`);
const NOT_BUILT =
  'apps/next-example is not built: run `pnpm build` at the repository root first (it runs `next build` after building the packages)';
const HEADERS = {
  accept: 'application/json, text/event-stream',
  'content-type': 'application/json',
  'mcp-protocol-version': LEGACY,
};

/** Starts `next start` and resolves once it prints that it is ready; rejects with its output if it exits. */
function startNext(port: number): Promise<{ child: ChildProcess; output: () => string }> {
  const child = startProcess(
    `next start (next-example) 127.0.0.1:${port}`,
    process.execPath,
    [NEXT_BIN, 'start', '-H', '127.0.0.1', '-p', String(port)],
    {
      cwd: APP,
      env: { ...process.env, NEXT_TELEMETRY_DISABLED: '1', NODE_ENV: 'production' },
      // Its own process group, so afterAll can end next-server and any worker it forks.
      detached: true,
    },
  );
  let out = '';
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      if (/Ready in/.test(out)) resolve({ child, output: () => out });
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`next start exited with ${code}:\n${out}`)));
  });
}

describe('apps/next-example under a real `next start`', () => {
  let next: { child: ChildProcess; output: () => string } | undefined;
  let url: URL;

  beforeAll(async () => {
    // A missing build fails the test below, not the hook: the report then names what to do.
    if (!BUILT) return;
    const port = await freePort();
    next = await startNext(port);
    url = new URL(`http://127.0.0.1:${port}/mcp`);
  });

  afterAll(() => {
    const pid = next?.child.pid;
    if (pid !== undefined && next!.child.exitCode === null) process.kill(-pid, 'SIGTERM');
  });

  it('runs long_task with closeEvery through SDK Client + StreamableHTTPClientTransport: every step once, in order', async () => {
    if (!BUILT) throw new Error(NOT_BUILT);
    const client = new Client({ name: 'next-start-test', version: '0' });
    const steps: number[] = [];
    const progress: number[] = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void steps.push((n.params.data as { step: number }).step));
    await client.connect(new StreamableHTTPClientTransport(url));

    const result = await client.callTool(
      { name: 'long_task', arguments: { steps: 9, intervalMs: 20, closeEvery: 2, retryMs: 10 } },
      undefined,
      { onprogress: (p) => void progress.push(p.progress) },
    );

    expect(result.content).toEqual([{ type: 'text', text: 'completed 9 steps' }]);
    expect(steps).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(progress).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    await client.close();
    expect(next!.output()).not.toMatch(/⨯|Error/);
  });

  it('streams event by event through Next, closes with the retry hint, and resumes on GET + Last-Event-ID', async () => {
    if (!BUILT) throw new Error(NOT_BUILT);
    const init = await fetch(url, {
      method: 'POST',
      headers: HEADERS,
      body: JSON.stringify(initializeRequest(0)),
    });
    const initEvents = await readSse(init.body!);
    expect(initEvents[0]!.raw).toMatch(/^id: \S+\nretry: 1000\ndata: $/);
    const session = { ...HEADERS, 'mcp-session-id': init.headers.get('mcp-session-id')! };
    await fetch(url, { method: 'POST', headers: session, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });

    const call = await fetch(url, {
      method: 'POST',
      headers: session,
      body: JSON.stringify(callTool(1, 'long_task', { steps: 3, intervalMs: 200, closeEvery: 2, retryMs: 500 })),
    });
    // Next must not compress or buffer the stream.
    expect(call.headers.get('content-encoding')).toBeNull();
    const arrivals: Array<{ at: number; raw: string; id?: string | undefined }> = [];
    for await (const e of sseBlocks(call.body!)) arrivals.push({ at: performance.now(), raw: e.raw, id: e.id });
    expect(arrivals.map((a) => a.raw.match(/"step":(\d+)/)?.[1] ?? a.raw)).toEqual([
      expect.stringMatching(/^id: \S+\nretry: 1000\ndata: $/),
      '1',
      '2',
      'retry: 500',
    ]);
    // Step 2 comes 200 ms after step 1; a buffered body would deliver both at once.
    expect(arrivals[2]!.at - arrivals[1]!.at).toBeGreaterThan(100);

    const resumed = await fetch(url, { headers: { ...session, 'last-event-id': arrivals[2]!.id! } });
    const rest = messagesOf(await readSse(resumed.body!));
    expect(rest.map((m) => m.params?.data?.step ?? m.result?.content[0].text)).toEqual([3, 'completed 3 steps']);
  });
});
