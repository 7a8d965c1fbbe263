// Compiled by the workspace typecheck; `node scripts/examples.mjs` checks that every `@example` in
// the sources is a copy of a region here, so a renamed option breaks the build, not the reader.
import express from 'express';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  closeSSEStream,
  createMcpHandler,
  inputResponses,
  introspectionVerifier,
  InvalidTokenError,
  jwtVerifier,
  taskTool,
  toFetchHandler,
  type TokenVerifier,
} from '@mcp-kit/core';
import { shutdownGracefully } from '@mcp-kit/core/node';
import { mcpAuthMetadata, mcpExpress } from '@mcp-kit/express';

declare function buildServer(): McpServer;
declare function longWork(): Promise<string>;
declare const Bun: { serve(options: { fetch(request: Request): Promise<Response> }): void };
const app = express();
const server = buildServer();

export function createMcpHandlerExample(): void {
  //#region createMcpHandler
  const mcp = createMcpHandler({ server: () => buildServer(), retryMs: 2_000 });
  app.use('/mcp', mcpExpress(mcp));
  //#endregion createMcpHandler
}

export function closeSSEStreamExample(): void {
  //#region closeSSEStream
  server.registerTool('report', {}, async (extra) => {
    closeSSEStream(extra, 10_000); // let go of the connection; the client polls every 10 s
    return { content: [{ type: 'text', text: await longWork() }] };
  });
  //#endregion closeSSEStream
}

export function toFetchHandlerExample(): void {
  //#region toFetchHandler
  const fetchHandler = toFetchHandler(createMcpHandler({ server: () => buildServer() }));
  Bun.serve({ fetch: (req) => fetchHandler(req) });
  //#endregion toFetchHandler
}

export function inputResponsesExample(): void {
  //#region inputResponses
  server.registerTool('greet_user', {}, async (extra) => {
    const answer = inputResponses(extra)?.user_name as { action: string; content?: { name?: string } } | undefined;
    if (answer?.action === 'accept') return { content: [{ type: 'text', text: `Hello, ${answer.content?.name}!` }] };
    const ask = {
      mode: 'form',
      message: 'What is your name?',
      requestedSchema: { type: 'object', properties: { name: { type: 'string' } } },
    };
    return { resultType: 'input_required', inputRequests: { user_name: { method: 'elicitation/create', params: ask } }, content: [] };
  });
  //#endregion inputResponses
}

declare function buildArchive(signal: AbortSignal): Promise<string>;

export function taskToolExample(): void {
  //#region taskTool
  server.registerTool('export_archive', { _meta: taskTool('required') }, async (extra) => {
    const url = await buildArchive(extra.signal); // the client polls tasks/get meanwhile
    return { content: [{ type: 'text', text: url }] };
  });
  //#endregion taskTool
}

declare const httpServer: import('node:http').Server;
const mcp = createMcpHandler({ server: () => buildServer() });

export function drainExample(): void {
  //#region drain
  // On SIGTERM: drain, stop listening, close, exit. `shutdownGracefully` from `@mcp-kit/core/node`
  // does it in one call (with Connection: close on every answer and a grace for open connections).
  process.on('SIGTERM', async () => {
    await mcp.drain({ deadlineMs: 25_000 }); // work moves to the other instances
    httpServer.close(async () => {
      await mcp.close(); // then this instance lets go of its place in the cluster
      process.exit(0);
    });
  });
  //#endregion drain
}

export function shutdownGracefullyExample(): void {
  //#region shutdownGracefully
  const server = app.listen(3000);
  shutdownGracefully(server, mcp, { deadlineMs: 25_000 }); // drain, close, exit on SIGTERM/SIGINT
  //#endregion shutdownGracefully
}

export function authExample(): void {
  //#region auth
  const mcp = createMcpHandler({
    server: () => buildServer(),
    auth: {
      authorizationServers: ['https://as.example.com'],
      verifier: jwtVerifier({ issuer: 'https://as.example.com' }),
      scopes: ['mcp'], // every request
      toolScopes: { long_task: ['mcp:long'] }, // tools/call of long_task, both eras
    },
  });
  app.use(mcpAuthMetadata(mcp)); // /.well-known/oauth-protected-resource/mcp
  app.use('/mcp', mcpExpress(mcp));
  //#endregion auth
}

export function jwtVerifierExample(): TokenVerifier {
  //#region jwtVerifier
  const verifier = jwtVerifier({ issuer: 'https://tenant.eu.auth0.com/', algorithms: ['RS256'] });
  //#endregion jwtVerifier
  return verifier;
}

export function introspectionVerifierExample(): TokenVerifier {
  //#region introspectionVerifier
  const verifier = introspectionVerifier({
    issuer: 'https://as.example.com',
    clientId: 'mcp-api',
    clientSecret: process.env.INTROSPECTION_SECRET!,
  });
  //#endregion introspectionVerifier
  return verifier;
}

declare const sessions: { lookup(token: string): Promise<{ clientId: string; scopes: string[]; userId: string } | undefined> };

export function invalidTokenErrorExample(): TokenVerifier {
  //#region InvalidTokenError
  const verifier: TokenVerifier = async (token) => {
    const session = await sessions.lookup(token);
    if (!session) throw new InvalidTokenError('unknown or revoked access token');
    return { token, clientId: session.clientId, scopes: session.scopes, extra: { sub: session.userId } };
  };
  //#endregion InvalidTokenError
  return verifier;
}
