// Workload 6: tools/call throughput and latency for 2026-07-28 clients. No session and no
// initialize: every request carries the `_meta` envelope (protocol version, client capabilities,
// client info) and the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers. All requests
// come from one kind of client (the same envelope), `inFlight` at a time, back to back.
import { McpHttp } from '../client/mcp.mjs';
import { measureCalls } from './throughput.mjs';

export async function modern(handle, { inFlight = 64, warmupMs = 2_000, durationMs = 10_000, tool = 'test_simple_text' }) {
  const client = new McpHttp(handle.origin, { connections: inFlight, path: handle.path, headers: handle.headers });
  try {
    // One call first, so a server that does not answer as the era asks (a result with `resultType`)
    // fails here rather than as a table of errors.
    const first = await client.callToolModern(tool);
    if (first.status !== 200 || !first.text.includes('"result"') || !first.text.includes('"resultType":"complete"'))
      throw new Error(`2026 tools/call: ${first.status} ${first.text.slice(0, 300)}`);
    return await measureCalls(client, { inFlight, warmupMs, durationMs }, () => client.callToolModern(tool));
  } finally {
    await client.close();
  }
}
