// What a session's McpServer costs on its own (the same for every MCP server here), measured in
// the load generator's process: it is most of "memory per session" for the SDK and mcp-kit alike.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createBenchServer } from './servers/tools.mjs';

class NullTransport {
  async start() {}
  async close() {}
  async send() {}
}

export async function mcpServerHeapBytes(count = 500) {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc');
  const keep = [];
  gc();
  gc();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < count; i++) {
    const server = createBenchServer('reference');
    await server.connect(new NullTransport());
    keep.push(server);
  }
  gc();
  gc();
  const bytes = (process.memoryUsage().heapUsed - before) / count;
  keep.length = 0;
  return bytes;
}
