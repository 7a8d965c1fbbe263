import { createMcpHandler, type McpHandler } from '@mcp-kit/core';
import { instrumentOpenTelemetry } from '@mcp-kit/core/otel';
import { exampleApp, type ExampleApp } from '@mcp-kit/fixtures/example-app';
import { getOrCreate, mcpNext, mcpNextAuthMetadata, type McpAuthMetadataRoutes, type McpRouteHandlers } from '@mcp-kit/next';

// PORT, HOST, MCP_SDK, REDIS_URL (scale-out), HIBERNATE_MS, INSTANCE_NAME, AUTH_ISSUER, …: see
// packages/fixtures/src/example-app.ts, which every example app shares. A route file may export
// only what Next reads (GET, POST, runtime, …): what both routes share lives here.

export interface Routes {
  handlers: McpRouteHandlers;
  /** app/.well-known/oauth-protected-resource: the Protected Resource Metadata; none without AUTH_ISSUER. */
  metadata: McpAuthMetadataRoutes | undefined;
  instanceName: string | undefined;
}

/**
 * The routes, made at the first request and not when a route module is imported: `next build`
 * imports it, and must not connect to Redis. Cached on globalThis (getOrCreate): `next dev`
 * re-evaluates route modules on edits, and sessions must outlive that. The first request waits
 * until this instance has joined the cluster; should that fail, requests that need Redis get 503s
 * until it is back, as on any instance that loses it.
 */
export function routes(): Promise<Routes> {
  return getOrCreate('next-example:routes', async () => {
    const example = exampleApp('next-example');
    // instrumentation-node.ts drains and closes it on SIGTERM, under this name.
    const mcp = getOrCreate('next-example', () => createHandler(example));
    await example.ready().then(
      () => console.log(example.describe()),
      (error: Error) => console.error(`next-example: Redis: ${error.message}`),
    );
    // On a serverless platform, Next's `after` (mcpNext's default) keeps the function alive while a
    // call whose stream the tool closed (or a task) still runs; under `next start` the process lives
    // on anyway. With WAIT_UNTIL_FILE (the serverless simulation) the handler has a `waitUntil` of
    // its own, which counts what is kept alive, and mcpNext leaves `after` out.
    // A route handler cannot see its socket: where `next start` listens (HOST, PORT) is what a
    // handler with AUTH_ISSUER but no AUTH_RESOURCE makes its loopback resource of.
    const listener = { localAddress: example.host, localPort: example.port };
    const metadata = example.auth ? mcpNextAuthMetadata(mcp, listener) : undefined;
    return { handlers: mcpNext(mcp, listener), metadata, instanceName: example.instanceName };
  });
}

function createHandler(example: ExampleApp): McpHandler {
  const handler = createMcpHandler({
    ...example.options,
    // A route handler cannot see its socket, so 'auto' cannot tell we listen on loopback: say so.
    dnsRebindingProtection: true,
    allowedHosts: ['localhost', '127.0.0.1', '[::1]'],
    // As under a serverless 60 s limit: end every SSE connection before it; clients resume.
    maxStreamDurationMs: Number(process.env.MAX_STREAM_MS ?? 55_000),
    // Any other option as JSON, e.g. MCP_KIT_OPTIONS='{"keepAliveMs":5000}' (the shared test suite uses it).
    ...(process.env.MCP_KIT_OPTIONS ? JSON.parse(process.env.MCP_KIT_OPTIONS) : {}),
  });
  // MCP_KIT_OTEL (see otel.ts): its metrics and spans go to the SDK instrumentation.ts set up.
  if (process.env.MCP_KIT_OTEL) instrumentOpenTelemetry(handler);
  return handler;
}

/** INSTANCE_NAME in `x-served-by`, unless the answer was forwarded from the session's owner, which named itself. */
export function servedBy(response: Response, instanceName: string | undefined): Response {
  if (!instanceName || response.headers.has('x-served-by')) return response;
  const headers = new Headers(response.headers);
  headers.set('x-served-by', instanceName);
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
}
