// Compiled by the workspace typecheck; see packages/core/examples/core.examples.ts. A route module
// of its own: it exports GET, as app/.well-known/oauth-protected-resource/[[...path]]/route.ts does.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createMcpHandler, jwtVerifier } from '@mcp-kit/core';
import { getOrCreate, mcpNextAuthMetadata } from '@mcp-kit/next';

declare function buildServer(): McpServer;
const issuer = 'https://as.example.com';
const mcp = getOrCreate('mcp', () =>
  createMcpHandler({ server: () => buildServer(), auth: { authorizationServers: [issuer], verifier: jwtVerifier({ issuer }) } }),
);

//#region mcpNextAuthMetadata
// app/.well-known/oauth-protected-resource/[[...path]]/route.ts
export const { GET, OPTIONS } = mcpNextAuthMetadata(mcp);
export const dynamic = 'force-dynamic';
//#endregion mcpNextAuthMetadata
