import { createMcpHandler } from '@mcp-kit/core';
import { instrumentOpenTelemetry } from '@mcp-kit/core/otel';
import { fixtureServer, parseFixtureSdk } from '@mcp-kit/fixtures';
import { getOrCreate, mcpNext } from '@mcp-kit/next';

// MCP_SDK=v1|v2 (default v2) picks the SDK the fixture is built with. instrumentation.ts stops
// `next start` on a bad value; this throws too, for any other way the module gets loaded.
const sdk = parseFixtureSdk(process.env.MCP_SDK);

// Cached on globalThis: `next dev` re-evaluates this module on edits, and sessions must outlive that.
const mcp = getOrCreate('next-example', () => {
  const handler = createMcpHandler({
    server: () => fixtureServer(sdk, { name: 'mcp-kit-next-example' }),
    retryMs: Number(process.env.RETRY_MS ?? 1000),
    // A route handler cannot see its socket, so 'auto' cannot tell we listen on loopback: say so.
    dnsRebindingProtection: true,
    allowedHosts: ['localhost', '127.0.0.1', '[::1]'],
    // The conformance suite never DELETEs its sessions; don't keep them around for long.
    sessionIdleTtlMs: Number(process.env.SESSION_TTL_MS ?? 5 * 60_000),
    // As under a serverless 60 s limit: end every SSE connection before it; clients resume.
    maxStreamDurationMs: Number(process.env.MAX_STREAM_MS ?? 55_000),
    // Any other option as JSON, e.g. MCP_KIT_OPTIONS='{"keepAliveMs":5000}' (the shared test suite uses it).
    ...(process.env.MCP_KIT_OPTIONS ? JSON.parse(process.env.MCP_KIT_OPTIONS) : {}),
  });
  // MCP_KIT_OTEL (see otel.ts): its metrics and spans go to the SDK instrumentation.ts set up.
  if (process.env.MCP_KIT_OTEL) instrumentOpenTelemetry(handler);
  return handler;
});

export const { GET, POST, DELETE, PUT, PATCH } = mcpNext(mcp);

// Sessions and SSE streams live in the Node.js server process; the edge runtime has neither.
export const runtime = 'nodejs';
// An MCP endpoint answers per request: never prerender or cache it.
export const dynamic = 'force-dynamic';
