import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { closeSSEStream } from '@mcp-kit/core';

/**
 * `ask_name`: lets go of its stream (a task, for a 2026 client with the extension), asks its client
 * for a name by elicitation, and answers `hello <name>`.
 */
export function registerAskName(server: McpServer): void {
  server.registerTool('ask_name', {}, async (extra) => {
    closeSSEStream(extra, 50);
    const answer = await server.server.elicitInput(
      { message: 'Your name?', requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } },
      { relatedRequestId: extra.requestId },
    );
    return { content: [{ type: 'text', text: `hello ${String(answer.content?.name)}` }] };
  });
}
