import { MEMORY_TELEMETRY, type MemoryTelemetry } from '../../../otel';

// With MCP_KIT_OTEL=memory (see otel.ts): what the SDK recorded in this process, as JSON (metric
// data of the latest cumulative export, and the finished spans' fields). 404 otherwise.
export async function GET(): Promise<Response> {
  const memory = (globalThis as Record<symbol, unknown>)[MEMORY_TELEMETRY] as MemoryTelemetry | undefined;
  if (!memory) return new Response('MCP_KIT_OTEL=memory is not set\n', { status: 404 });
  await memory.reader.forceFlush();
  const latest = memory.metrics.getMetrics().at(-1);
  memory.metrics.reset();
  const spans = memory.spans.getFinishedSpans().map((s) => ({
    name: s.name,
    kind: s.kind,
    instrumentationScope: { name: s.instrumentationScope.name },
    attributes: s.attributes,
    status: s.status,
    startTime: s.startTime,
    endTime: s.endTime,
    parentSpanContext: s.parentSpanContext && { spanId: s.parentSpanContext.spanId },
  }));
  return Response.json({ metrics: latest?.scopeMetrics.flatMap((m) => m.metrics) ?? [], spans });
}

export const runtime = 'nodejs';
export const dynamic = 'force-dynamic';
