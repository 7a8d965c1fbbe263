import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { createMcpHandler } from '@mcp-kit/core';
import { createFixtureServer } from '@mcp-kit/fixtures';
import { toFetchHandler, type FetchHandler } from '@mcp-kit/next';

/**
 * The smallest `node:http` host for a fetch handler, as Hono's node-server or Next's own server do
 * it: the request becomes a `Request` whose signal aborts when the socket closes early, and the
 * response body is pumped chunk by chunk, waiting for `drain`.
 */
function serveFetch(fetchHandler: FetchHandler): Server {
  return createServer((req: IncomingMessage, res: ServerResponse) => {
    const aborted = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) aborted.abort();
    });
    const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
    const init: RequestInit & { duplex?: 'half' } = {
      method: req.method,
      headers: Object.entries(req.headers).flatMap(([k, v]) => (v === undefined ? [] : [[k, String(v)] as [string, string]])),
      signal: aborted.signal,
    };
    if (hasBody) {
      init.body = Readable.toWeb(req) as ReadableStream<Uint8Array>;
      init.duplex = 'half';
    }
    void fetchHandler(new Request(`http://${req.headers.host}${req.url}`, init)).then(async (response) => {
      res.writeHead(response.status, Object.fromEntries(response.headers));
      if (!response.body) return void res.end();
      res.flushHeaders();
      const reader = response.body.getReader();
      aborted.signal.addEventListener('abort', () => void reader.cancel().catch(() => {}));
      for (;;) {
        const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true as const }));
        if (done) break;
        if (!res.write(value)) await new Promise((resolve) => res.once('drain', resolve));
      }
      res.end();
    });
  });
}

describe('toFetchHandler: the same web bridge as a plain fetch handler on node:http', () => {
  const mcp = createMcpHandler({ server: () => createFixtureServer(), retryMs: 20 });
  let server: Server;
  let url: URL;
  let resumes = 0;

  beforeAll(async () => {
    const fetchHandler = toFetchHandler(mcp, { localAddress: '127.0.0.1' });
    server = serveFetch((request) => {
      if (request.headers.has('last-event-id')) resumes++;
      return fetchHandler(request);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`);
  });
  afterAll(async () => {
    await mcp.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('serves an SDK client a long_task whose stream closes every 2 steps, each log once and in order', async () => {
    const client = new Client({ name: 'fetch-test', version: '0' });
    const steps: number[] = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void steps.push((n.params.data as { step: number }).step));
    await client.connect(new StreamableHTTPClientTransport(url));

    const result = await client.callTool({ name: 'long_task', arguments: { steps: 7, intervalMs: 5, closeEvery: 2, retryMs: 10 } });

    expect(result.content).toEqual([{ type: 'text', text: 'completed 7 steps' }]);
    expect(steps).toEqual([1, 2, 3, 4, 5, 6, 7]);
    // The stream was closed and resumed (how often depends on whether a close found a connection).
    expect(resumes).toBeGreaterThan(0);
    await client.close();
  });
});
