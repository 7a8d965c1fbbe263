/**
 * `handler.drain()` on a single instance (no cluster): there is no peer to send clients to, so the
 * calls that run go on where they are, their polling clients come back here for the answer, new
 * sessions are refused, and the drain resolves only once every answer was fetched. In-process
 * adapters: the test drives the handler's drain() and observes its events.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { closeSSEStream, FORWARDED_HEADER, type EngineEvent } from '@mcp-kit/core';
import { inProcessAdapters, type ServerUnderTest } from '@mcp-kit/testbed/adapters';
import { errorOf, http } from '@mcp-kit/testbed/fetch-client';
import { initializeRequest } from '@mcp-kit/testbed/requests';

/** A tool that lets go of its stream (the client comes back in 300 ms) and answers once released. */
function gatedServer(gate: { release?: () => void }): McpServer {
  const server = new McpServer({ name: 'gated', version: '1.0.0' });
  server.registerTool('gated', { description: 'answers once released' }, async (extra) => {
    closeSSEStream(extra, 300);
    await new Promise<void>((resolve) => (gate.release = resolve));
    return { content: [{ type: 'text', text: 'released' }] };
  });
  return server;
}

describe.each(inProcessAdapters)('drain without a cluster: $name', (adapter) => {
  let sut: ServerUnderTest | undefined;
  let client: Client | undefined;
  afterEach(async () => {
    await client?.close();
    await sut?.close();
  });

  it('an answer written while its polling client is away is fetched here before the drain resolves; new sessions get 503', async () => {
    const gate: { release?: () => void } = {};
    sut = await adapter.start({ server: () => gatedServer(gate), retryMs: 300 });
    const handler = sut.inProcess!.handler;
    const closed = new Promise<void>((resolve) => {
      const stop = handler.observe((e: EngineEvent) => {
        if (e.type === 'stream.close' && e.kind === 'post' && e.reason === 'server-close') {
          stop();
          resolve();
        }
      });
    });
    client = new Client({ name: 'drain', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(sut.url)));
    const call = client.callTool({ name: 'gated', arguments: {} });
    await closed;

    // The client is away for 300 ms: the drain starts, and the call answers meanwhile.
    let drained = false;
    const draining = handler.drain({ deadlineMs: 20_000 }).then(() => (drained = true));
    expect(await errorOf(await http(sut.url).post(initializeRequest()))).toMatchObject({ status: 503, code: -32000 });
    // A client that dresses its initialize up as another instance's forward is a client all the
    // same: without a cluster there is no other instance (invariant: configuration-trusted).
    const forged = await http(sut.url).post(initializeRequest(), { [FORWARDED_HEADER]: 'node-0' });
    expect(await errorOf(forged)).toMatchObject({ status: 503, code: -32000 });
    gate.release!();

    const result = await call;
    expect(result.content).toEqual([{ type: 'text', text: 'released' }]);
    await draining;
    expect(drained).toBe(true);
    expect(handler.sessionCount).toBe(0);
  });
});
