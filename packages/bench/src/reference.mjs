// What a session's McpServer costs on its own (the same for every MCP server of one SDK major here),
// measured in the load generator's process: it is most of "memory per session" for the SDK and
// mcp-kit alike. The SDK v2 rows serve a smaller server (tools-v2.mjs), measured the same way.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { createBenchServer } from './servers/tools.mjs';
import { createBenchServerV2 } from './servers/tools-v2.mjs';

class NullTransport {
  async start() {}
  async close() {}
  async send() {}
}

export async function mcpServerHeapBytes(sdk = 'v1', count = 500) {
  const create = sdk === 'v2' ? createBenchServerV2 : createBenchServer;
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc');
  const keep = [];
  // One server first, so what the SDK sets up once (schemas, caches) is not counted per server.
  await create('reference').connect(new NullTransport());
  gc();
  gc();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < count; i++) {
    const server = create('reference');
    await server.connect(new NullTransport());
    keep.push(server);
  }
  gc();
  gc();
  const bytes = (process.memoryUsage().heapUsed - before) / count;
  keep.length = 0;
  return bytes;
}
