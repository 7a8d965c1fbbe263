// The SDK v2 (`@modelcontextprotocol/server`) side of the bench's MCP surface: the tools the
// workloads call, written against v2's McpServer so the SDK v2 anchors serve what the v1 servers
// serve. Only those tools (the fixture's other tools, resources and prompts are not here), so a v2
// server is smaller than a v1 bench server: per-request factories and per-session memory cost less.
import { McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { BURST_PAYLOAD, BURST_YIELD_EVERY } from './tools.mjs';

const yieldToLoop = () => new Promise((resolve) => setImmediate(resolve));

function pause(ms, signal) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}

const text = (value) => ({ content: [{ type: 'text', text: value }] });

// Built once: createMcpHandler builds a server per request, and the anchor should not pay for the
// bench's own schema objects on top of what the SDK does for each new server.
const burstInput = z.object({ count: z.number().int().min(0).max(1_000_000) });
const longTaskInput = z.object({
  steps: z.number().int().min(1).max(100_000),
  intervalMs: z.number().int().min(0).max(60_000),
  closeEvery: z.number().int().min(1).optional(),
  retryMs: z.number().int().min(0).optional(),
});

/**
 * A fresh v2 McpServer with `test_simple_text` (tools/call workloads), `bench_burst` (burst,
 * resume) and `long_task` (polling), each behaving as its v1 namesake in the fixture or tools.mjs.
 */
export function createBenchServerV2(name) {
  const server = new McpServer({ name, version: '0.0.0' }, { capabilities: { logging: {}, tools: { listChanged: true } } });

  server.registerTool('test_simple_text', { description: 'Returns one text content item' }, () =>
    text('This is a simple text response for testing.'),
  );

  server.registerTool(
    'bench_burst',
    {
      description: 'Sends `count` ~100-byte notifications/message on this request stream, then returns',
      inputSchema: burstInput,
    },
    async ({ count }, ctx) => {
      for (let i = 1; i <= count; i++) {
        await ctx.mcpReq.notify({
          method: 'notifications/message',
          params: { level: 'info', logger: 'bench', data: `${BURST_PAYLOAD}${i % 10_000}` },
        });
        if (i % BURST_YIELD_EVERY === 0) await yieldToLoop();
      }
      return text(`burst ${count}`);
    },
  );

  // v2's closeSSE takes no retry: the transport's `retryInterval` is the hint, so `retryMs` is
  // accepted (the workloads send it) and the server process's BENCH_RETRY_MS must match it.
  server.registerTool(
    'long_task',
    {
      description: 'Runs `steps` steps `intervalMs` apart, logging { step } each step; closes its SSE stream every `closeEvery` steps',
      inputSchema: longTaskInput,
    },
    async ({ steps, intervalMs, closeEvery }, ctx) => {
      const progressToken = ctx.mcpReq._meta?.progressToken;
      for (let step = 1; step <= steps; step++) {
        await ctx.mcpReq.notify({ method: 'notifications/message', params: { level: 'info', logger: 'long_task', data: { step } } });
        if (progressToken !== undefined) {
          await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken, progress: step, total: steps } });
        }
        if (step === steps) break;
        if (closeEvery !== undefined && step % closeEvery === 0) ctx.http?.closeSSE?.();
        if (intervalMs > 0) await pause(intervalMs, ctx.mcpReq.signal);
        else if (step % 64 === 0) await yieldToLoop();
        ctx.mcpReq.signal.throwIfAborted();
      }
      return text(`completed ${steps} steps`);
    },
  );
  return server;
}
