// Compiled by the workspace typecheck; `node scripts/examples.mjs` checks that every `@example` in
// the sources is a copy of a region here.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { createMcpHandler } from '@mcp-kit/core';
import { instrumentOpenTelemetry } from '@mcp-kit/core/otel';

declare function buildServer(): McpServer;

export function instrumentOpenTelemetryExample(): void {
  //#region instrumentOpenTelemetry
  const mcp = createMcpHandler({ server: () => buildServer() });
  instrumentOpenTelemetry(mcp); // after the OpenTelemetry SDK registered its providers
  //#endregion instrumentOpenTelemetry
}
