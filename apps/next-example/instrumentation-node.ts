import type { McpHandler } from '@mcp-kit/core';
import { parseFixtureSdk } from '@mcp-kit/fixtures';
import { getOrCreate } from '@mcp-kit/next';
import { setUpOpenTelemetry } from './otel';

// A bad MCP_SDK stops `next start` here, with one clear line, instead of failing every request
// to /mcp later (app/mcp/route.ts reads the same setting).
try {
  console.log(`next-example: fixture on SDK ${parseFixtureSdk(process.env.MCP_SDK)}`);
} catch (error) {
  console.error(`next-example: ${(error as Error).message}`);
  process.exit(1);
}

// MCP_KIT_OTEL=console|memory: the OpenTelemetry SDK, before any route records into it (otel.ts).
if (process.env.MCP_KIT_OTEL) setUpOpenTelemetry(process.env.MCP_KIT_OTEL);

// SIGTERM (a deploy) or SIGINT: the handler stops taking new sessions, lets running calls finish
// (at most DRAIN_MS, default 10 s), then ends every stream with the retry hint. `next start`'s
// own handler stops listening and waits for every open connection, which an SSE stream never
// closes by itself: ending them is what lets it exit. With NEXT_MANUAL_SIG_HANDLE=true (set it in
// the start script's environment, as Next documents) Next leaves the signal to us and we exit here.
let stopping = false;
async function shutdown(signal: NodeJS.Signals): Promise<void> {
  if (stopping) return;
  stopping = true;
  // The route module creates the handler on its first request (getOrCreate); none yet, nothing to drain.
  const mcp = getOrCreate<McpHandler | undefined>('next-example', () => undefined);
  if (mcp) {
    const started = Date.now();
    const deadlineMs = Number(process.env.DRAIN_MS ?? 10_000);
    console.log(`next-example: ${signal}: draining (deadline ${deadlineMs} ms)`);
    try {
      await mcp.drain({ deadlineMs });
      console.log(`next-example: drained in ${Date.now() - started} ms`);
    } catch (error) {
      console.error(`next-example: drain failed: ${(error as Error).message}`);
    }
    await mcp.close();
  }
  if (process.env.NEXT_MANUAL_SIG_HANDLE) process.exit(0);
}
process.on('SIGTERM', (signal) => void shutdown(signal));
process.on('SIGINT', (signal) => void shutdown(signal));
