// Compiled by the workspace typecheck; see packages/core/examples/core.examples.ts.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createMcpHandler } from '@mcp-kit/core';
import { createRedisScaleOut } from '@mcp-kit/redis';

declare function buildServer(): McpServer;
declare const podIp: string;

export function createRedisScaleOutExample(): void {
  //#region createRedisScaleOut
  const redis = createRedisScaleOut({ url: process.env.REDIS_URL, internalUrl: `http://${podIp}:3000/mcp` });
  const mcp = createMcpHandler({
    server: () => buildServer(),
    eventStore: redis.eventStore,
    cluster: redis.cluster,
    taskStore: redis.taskStore,
  });
  //#endregion createRedisScaleOut
  void mcp;
}
