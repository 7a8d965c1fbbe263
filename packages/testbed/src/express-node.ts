/**
 * An Express instance in the test's own process on a real redis-server, in a forwarding or a
 * shared cluster: for tests that reach into an instance (its handler, its cluster) while it serves
 * over HTTP. Instances out of process are cluster.ts's.
 */
import { createServer, type Server } from 'node:http';
import express from 'express';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createMcpHandler, FORWARDED_HEADER, type McpHandler } from '@mcp-kit/core';
import { mcpExpress } from '@mcp-kit/express';
import { createRedisClient, createRedisScaleOut, type RedisScaleOut } from '@mcp-kit/redis';
import { freePort } from './processes.js';

export interface ExpressNode {
  url: string;
  handler: McpHandler;
  scaleOut: RedisScaleOut;
  close(): Promise<void>;
  /**
   * As the process died: its connections break, it stops listening and its Redis connection drops
   * (no heartbeat; nothing of it is ended or deleted). What runs in it is left to hang.
   */
  crash(): Promise<void>;
  /**
   * The next request a peer forwards here makes the instance crash as its head is read, before
   * anything of it is handled: the peer wrote the whole request and sees its connection break.
   */
  crashAtNextForward(): void;
}

export async function startExpressNode(options: {
  redisUrl: string;
  mode: 'forward' | 'shared';
  keyPrefix: string;
  server: () => McpServer;
  /** The handler's `jsonResponse`: answers as one JSON body, sent when the call is done. */
  jsonResponse?: boolean;
}): Promise<ExpressNode> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}/mcp`;
  const client = createRedisClient(options.redisUrl);
  const scaleOut = createRedisScaleOut({
    client,
    keyPrefix: options.keyPrefix,
    heartbeatMs: 500,
    ...(options.mode === 'shared' ? { mode: 'shared' as const } : { internalUrl: url }),
  });
  const handler = createMcpHandler({
    server: options.server,
    retryMs: 100,
    eventStore: scaleOut.eventStore,
    cluster: scaleOut.cluster,
    taskStore: scaleOut.taskStore,
    jsonResponse: options.jsonResponse,
    onError: () => {},
  });
  const app = express();
  app.use('/mcp', mcpExpress(handler));
  let crashAtForward = false;
  const server: Server = createServer((req, res) => {
    if (crashAtForward && req.headers[FORWARDED_HEADER] !== undefined) {
      crashAtForward = false;
      void crash();
      return;
    }
    app(req, res);
  });
  const crash = async () => {
    client.disconnect();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  };
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  await scaleOut.ready();
  return {
    url,
    handler,
    scaleOut,
    crash,
    crashAtNextForward() {
      crashAtForward = true;
    },
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await handler.close().catch(() => {});
      client.disconnect();
    },
  };
}
