/**
 * What a session's standalone GET stream carries in each cluster mode (the modes compared
 * in docs/design.md). The session is created on A; its client holds its standalone
 * stream through B; a tool call on A, then one on B, each sends `notifications/resources/updated`
 * outside any request (the server's own notification, as a resource change would send it).
 * - Forwarding: B forwards the GET and the call to the session's owner, A, whose one server sends
 *   both notifications: the stream carries both, in order.
 * - Shared: B serves the GET and its call with its own copy of the session; A's copy has no
 *   standalone stream and B's copy never hears what A's sends: the stream carries B's alone. This
 *   is the feature a shared cluster cannot give; if it ever does, this test and the table say so.
 * Two Express instances in this process on one real redis-server, reaching each other over HTTP.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';
import { startExpressNode, type ExpressNode } from '@mcp-kit/testbed/express-node';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';
import { callTool } from '@mcp-kit/testbed/requests';
import { http, openSession } from '@mcp-kit/testbed/fetch-client';

let redis: TestRedis;
let nodes: ExpressNode[] = [];

beforeAll(async () => {
  redis = await startRedis();
});

afterEach(async () => {
  for (const n of nodes) await n.close();
  nodes = [];
});

afterAll(async () => {
  await redis?.stop();
});

/** A server whose `touch` tool announces a change of `uri` to the session, not to the request. */
function buildServer(): McpServer {
  const server = new McpServer({ name: 'standalone-stream', version: '1.0.0' }, { capabilities: { resources: { subscribe: true } } });
  server.registerTool('touch', { inputSchema: { uri: z.string() } }, async ({ uri }) => {
    await server.server.sendResourceUpdated({ uri });
    return { content: [{ type: 'text', text: `touched ${uri}` }] };
  });
  return server;
}

async function startNode(mode: 'forward' | 'shared', prefix: string): Promise<ExpressNode> {
  const node = await startExpressNode({ redisUrl: redis.url, mode, keyPrefix: prefix, server: buildServer });
  nodes.push(node);
  return node;
}

/** Calls `touch` through `url` and waits for its answer, so its notification was sent before the next step. */
async function touch(url: string, headers: Record<string, string>, id: number, uri: string): Promise<void> {
  const call = await http(url).postSse(callTool(id, 'touch', { uri }), headers);
  await call.until((m) => m.id === id);
}

const CASES = [
  { mode: 'forward', carried: ['test://from-a', 'test://from-b'] },
  { mode: 'shared', carried: ['test://from-b'] },
] as const;

describe.each(CASES)('a $mode cluster', ({ mode, carried }) => {
  it(`the standalone stream held through B carries ${carried.length === 2 ? 'every server notification of the session' : "only B's copy's"}`, async () => {
    const a = await startNode(mode, `standalone-${mode}:`);
    const b = await startNode(mode, `standalone-${mode}:`);
    const { headers } = await openSession(http(a.url));
    const stream = await http(b.url).getSse(headers);
    // The priming event: the stream is open (on A through B, or on B's copy) before anything is sent.
    const priming = await stream.next();
    expect(priming.id).toBeTruthy();

    await touch(a.url, headers, 2, 'test://from-a');
    await touch(b.url, headers, 3, 'test://from-b');
    // B's notification is sent after A's call was answered: on one stream, A's would come first.
    const blocks = await stream.until((m) => m.params?.uri === 'test://from-b');
    const updated = blocks
      .filter((block) => block.data)
      .map((block) => JSON.parse(block.data!))
      .filter((m) => m.method === 'notifications/resources/updated')
      .map((m) => m.params.uri);
    expect(updated).toEqual(carried);
    stream.abort();
  });
});
