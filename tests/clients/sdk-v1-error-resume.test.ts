/**
 * An error answer on a polled stream, with the SDK v1 client (1.32.2). That client counts only a
 * *result* as the end of a resumed stream: after an error it comes back for the same stream at
 * every `retry`, for as long as it lives, unless the server tells it there is nothing left. The
 * resume whose cursor is the finished stream's last event gets `204`, and the client stops.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { CallToolRequestSchema, ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { closeSSEStream } from '@mcp-kit/core';
import { inProcessAdapters, type ServerUnderTest } from '@mcp-kit/testbed/adapters';
import { WireLog } from '@mcp-kit/testbed/wire-log';

/** `fails` lets go of its stream, then answers with a JSON-RPC error; `slow` lets go of its stream every few steps. */
function server(): McpServer {
  const mcp = new McpServer({ name: 'error-resume', version: '1.0.0' }, { capabilities: { tools: {} } });
  mcp.server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    closeSSEStream(extra, 20);
    const steps = request.params.name === 'slow' ? 8 : 1;
    for (let step = 1; step <= steps; step++) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: 'p', progress: step } });
      if (step % 2 === 0) closeSSEStream(extra, 20);
    }
    if (request.params.name === 'fails') throw new McpError(ErrorCode.InvalidParams, 'this call fails on purpose');
    return { content: [{ type: 'text', text: 'done' }] };
  });
  return mcp;
}

describe.each(inProcessAdapters)('SDK v1 client, an error answer on a polled stream, on $name', (adapter) => {
  let sut: ServerUnderTest | undefined;
  let client: Client | undefined;
  afterEach(async () => {
    await client?.close();
    await sut?.close();
  });

  it('the client comes back once for the finished stream, gets 204, and stops', async () => {
    sut = await adapter.start({ server: () => server(), retryMs: 20 });
    const wire = new WireLog();
    client = new Client({ name: 'error-resume', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(sut.url), { fetch: wire.fetch }));

    await expect(client.callTool({ name: 'fails', arguments: {} })).rejects.toThrow('this call fails on purpose');
    const failedId = wire.posted('tools/call')[0]!.body.id;
    const cursorsOfFailed = () => {
      const ids = new Set<string>();
      for (const e of wire.exchanges)
        if (e.text.includes(`"id":${failedId}`)) for (const m of e.text.matchAll(/^id: ?(.+)$/gm)) ids.add(m[1]!);
      return wire.resumes.filter((r) => ids.has(r.headers.get('last-event-id')!));
    };

    // A second call that polls for ~200 ms at a 20 ms retry: a client looping on the failed
    // stream would come back for it about ten times meanwhile.
    const result = await client.callTool({ name: 'slow', arguments: {} });
    expect(result.content).toEqual([{ type: 'text', text: 'done' }]);
    const after = cursorsOfFailed().filter((r) => r.status === 204);
    expect(after).toHaveLength(1);
    expect(cursorsOfFailed().every((r) => r.status === 200 || r.status === 204)).toBe(true);
    expect(sut.errors).toEqual([]);
  });
});
