/** What the SDK v1 client answers the fixture's server-to-client requests with, in every suite that asks. */
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CreateMessageRequestSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

/** Sampling echoes the prompt (`echo: <text>`); elicitation accepts as `name` (`<name>@example.com`). */
export function answerServerRequests(client: Client, name = 'ada'): void {
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => ({
    model: 'test-model',
    role: 'assistant',
    content: { type: 'text', text: `echo: ${(req.params.messages[0]!.content as { text: string }).text}` },
  }));
  client.setRequestHandler(ElicitRequestSchema, async () => ({
    action: 'accept',
    content: { username: name, email: `${name}@example.com` },
  }));
}
