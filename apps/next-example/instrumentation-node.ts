import { parseFixtureSdk } from '@mcp-kit/fixtures';
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
