import { readExampleEnv, shutdownOptions, type ExampleEnv } from '@mcp-kit/fixtures/example-app';
import { drainOnShutdown } from '@mcp-kit/next/shutdown';
import { setUpOpenTelemetry } from './otel';

// A bad setting (MCP_SDK=v3, HIBERNATE_MS=soon) stops `next start` here, with one clear line,
// instead of failing every request to /mcp later (app/mcp/route.ts reads the same settings).
let settings: ExampleEnv;
try {
  settings = readExampleEnv('next-example');
  console.log(`next-example: fixture on SDK ${settings.sdk}`);
} catch (error) {
  console.error(`next-example: ${(error as Error).message}`);
  process.exit(1);
}

// MCP_KIT_OTEL=console|memory: the OpenTelemetry SDK, before any route records into it (otel.ts).
if (process.env.MCP_KIT_OTEL) setUpOpenTelemetry(process.env.MCP_KIT_OTEL);

// SIGTERM (a deploy) or SIGINT: the handler hands its sessions over, lets running calls finish
// (at most DRAIN_MS), then ends every stream with the retry hint and leaves the cluster. The start
// script sets NEXT_MANUAL_SIG_HANDLE=true, so Next leaves the signal to us and drainOnShutdown exits
// once that is done: Next's own handler stops listening at once and exits as soon as the last
// connection has ended, cutting a drain that still talks to Redis (the instance would linger in the
// cluster for 3 heartbeats). Without it (a bare `next start`) we drain and close, and Next exits.
// The route creates the handler at its first request, under this name (mcp.ts): none yet, nothing
// to drain.
drainOnShutdown('next-example', shutdownOptions(settings));
