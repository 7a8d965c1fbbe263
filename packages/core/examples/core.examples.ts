// Compiled by the workspace typecheck; `node scripts/examples.mjs` checks that every `@example` in
// the sources is a copy of a region here, so a renamed option breaks the build, not the reader.
import express from 'express';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { closeSSEStream, createMcpHandler, inputResponses, taskTool, toFetchHandler } from '@mcp-kit/core';
import { mcpExpress } from '@mcp-kit/express';

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

declare const httpServer: { close(callback: () => void): void };
const mcp = createMcpHandler({ server: () => buildServer() });

export function drainExample(): void {
  //#region drain
  process.on('SIGTERM', async () => {
    await mcp.drain({ deadlineMs: 25_000 }); // work moves to the other instances
    httpServer.close(async () => {
      await mcp.close(); // then this instance lets go of its place in the cluster
      process.exit(0);
    });
  });
  //#endregion drain
}
