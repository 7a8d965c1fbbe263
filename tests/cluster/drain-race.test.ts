/**
 * A shared cluster (no internalUrl): a draining instance serves a request that raced its removal
 * from the rotation with a copy of its own (it has no peer to hand it to). The drain must wait for
 * that call as for any other; an app exits when drain() resolves, and a call it left running is
 * lost (its client hears "the server instance running this request was lost").
 *
 * Seen in a CI run of tests/cluster/rolling-restart.test.ts (shared): a tools/call that reached
 * node-0 just before its SIGTERM was still reading the session's record when the drain looked for
 * busy sessions, found none, and let the process exit. Here the record read is held until the
 * drain has started, as a slow Redis under load holds it. Two Express instances in this process on
 * one real redis-server.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
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

/** Set when the tool's body has done its work (the drain must not end before). */
let worked = false;

function buildServer(): McpServer {
  const server = new McpServer({ name: 'drain-race', version: '1.0.0' });
  server.registerTool('work', {}, async () => {
    await new Promise((resolve) => setTimeout(resolve, 300));
    worked = true;
    return { content: [{ type: 'text', text: 'worked' }] };
  });
  return server;
}

async function startNode(): Promise<ExpressNode> {
  const node = await startExpressNode({ redisUrl: redis.url, mode: 'shared', keyPrefix: 'drain-race:', server: buildServer });
  nodes.push(node);
  return node;
}

describe('a draining instance of a shared cluster', () => {
  it('waits for a call whose session it was still reading when the drain began, and the call gets its result', async () => {
    const a = await startNode();
    const b = await startNode();
    const { headers } = await openSession(http(a.url));

    // B reads the session's record (its copy) only once the drain has begun.
    const copies = b.scaleOut.cluster.copies!;
    const restore = copies.restore.bind(copies);
    let reading!: () => void;
    const readStarted = new Promise<void>((resolve) => (reading = resolve));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    copies.restore = async (...args: Parameters<typeof restore>) => {
      reading();
      await released;
      return restore(...args);
    };

    const call = http(b.url).postSse(callTool(2, 'work'), headers);
    await readStarted;
    // Whether the call had done its work when the drain ended. (Not the order in which the client
    // hears the answer and the drain ends: the answer is written, then the drain ends at its next
    // look, and the client may read the answer a moment after that.)
    worked = false;
    const drained = b.handler.drain({ deadlineMs: 10_000 }).then(() => worked);
    // The drain's first look for running work is made in the turn of the event loop it was
    // called in (the record read held above takes a round trip to Redis, never less than a turn):
    // once that turn is over, the drain has either ended, too early, or waits for the call.
    await new Promise((resolve) => setImmediate(resolve));
    release();

    const stream = await call;
    const blocks = await stream.until((m) => m.id === 2);
    const answer = blocks
      .filter((block) => block.data)
      .map((block) => JSON.parse(block.data!))
      .find((m) => m.id === 2);
    expect(answer).toMatchObject({ result: { content: [{ type: 'text', text: 'worked' }] } });
    expect(await drained).toBe(true);
  });
});
