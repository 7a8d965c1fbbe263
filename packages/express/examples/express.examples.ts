// Compiled by the workspace typecheck; see packages/core/examples/core.examples.ts.
import http from 'node:http';
import express from 'express';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createMcpHandler } from '@mcp-kit/core';
import { mcpExpress, mcpFirst } from '@mcp-kit/express';

declare function buildServer(): McpServer;
const app = express();

export function mcpExpressExample(): void {
  //#region mcpExpress
  const mcp = createMcpHandler({ server: () => buildServer() });
  app.use('/mcp', mcpExpress(mcp));
  //#endregion mcpExpress
}

export function mcpFirstExample(): void {
  //#region mcpFirst
  const mcp = createMcpHandler({ server: () => buildServer() });
  const server = http.createServer(mcpFirst(app, mcp, { path: '/mcp' }));
  server.listen(3000, '127.0.0.1');
  //#endregion mcpFirst
}
