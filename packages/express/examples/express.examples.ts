// Compiled by the workspace typecheck; see packages/core/examples/core.examples.ts.
import http from 'node:http';
import express from 'express';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createMcpHandler, jwtVerifier } from '@mcp-kit/core';
import { mcpAuthMetadata, mcpExpress, mcpFirst } from '@mcp-kit/express';

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

declare const issuer: string;

export function mcpAuthMetadataExample(): void {
  //#region mcpAuthMetadata
  const mcp = createMcpHandler({
    server: () => buildServer(),
    auth: { authorizationServers: [issuer], verifier: jwtVerifier({ issuer }), scopes: ['mcp'] },
  });
  app.use(mcpAuthMetadata(mcp));
  app.use('/mcp', mcpExpress(mcp));
  //#endregion mcpAuthMetadata
}
