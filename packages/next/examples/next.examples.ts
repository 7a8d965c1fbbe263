// Compiled by the workspace typecheck; see packages/core/examples/core.examples.ts.
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createMcpHandler } from '@mcp-kit/core';
import { getOrCreate, mcpNext, type McpNextOptions } from '@mcp-kit/next';

declare function buildServer(): McpServer;
declare function verifyToken(token: string): Promise<AuthInfo>;

export const options: McpNextOptions = {
  //#region getAuthInfo
  getAuthInfo: async (req) => {
    const token = req.headers.get('authorization')?.replace(/^Bearer /i, '');
    return token ? await verifyToken(token) : undefined; // → { token, clientId, scopes, extra }
  },
  //#endregion getAuthInfo
};

//#region mcpNext
// app/mcp/route.ts
const mcp = getOrCreate('mcp', () =>
  createMcpHandler({
    server: () => buildServer(),
    maxStreamDurationMs: 50_000, // close streams before the platform's 60 s limit; clients resume
  }),
);
export const { GET, POST, DELETE, PUT, PATCH } = mcpNext(mcp);
export const runtime = 'nodejs'; // sessions and streams need the Node.js runtime
export const dynamic = 'force-dynamic'; // never prerender or cache an MCP endpoint
//#endregion mcpNext

//#region drainOnShutdown
// instrumentation.ts
export async function register() {
  if (process.env.NEXT_RUNTIME === 'nodejs') (await import('@mcp-kit/next/shutdown')).drainOnShutdown('mcp');
}
//#endregion drainOnShutdown
