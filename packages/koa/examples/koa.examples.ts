// Compiled by the workspace typecheck; see packages/core/examples/core.examples.ts.
import Koa from 'koa';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createMcpHandler } from '@mcp-kit/core';
import { mcpKoa } from '@mcp-kit/koa';

declare function buildServer(): McpServer;
const app = new Koa();

export function mcpKoaExample(): void {
  //#region mcpKoa
  const mcp = createMcpHandler({ server: () => buildServer() });
  app.use(mcpKoa(mcp, { path: '/mcp' }));
  //#endregion mcpKoa
}
