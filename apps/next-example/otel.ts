// MCP_KIT_OTEL=console|memory: this process's OpenTelemetry SDK, set up by instrumentation.ts
// before any route runs; app/mcp/route.ts then records the handler with instrumentOpenTelemetry.
// `console` prints metrics every 10 s and spans as they end: swap in the exporter of your backend
// (OTLP, Prometheus, …). `memory` keeps everything for GET /mcp-kit/otel, which the tests read.
import { metrics, trace } from '@opentelemetry/api';
import {
  AggregationTemporality,
  ConsoleMetricExporter,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ConsoleSpanExporter,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';

/** Where `memory` mode keeps its reader and exporter: route modules are bundled apart from this one. */
export const MEMORY_TELEMETRY = Symbol.for('next-example.otel.memory');

export interface MemoryTelemetry {
  reader: PeriodicExportingMetricReader;
  metrics: InMemoryMetricExporter;
  spans: InMemorySpanExporter;
}

export function setUpOpenTelemetry(mode: string): void {
  if (mode !== 'console' && mode !== 'memory') {
    console.error(`next-example: MCP_KIT_OTEL must be console or memory, got ${JSON.stringify(mode)}`);
    process.exit(1);
  }
  const memory = mode === 'memory';
  const metricExporter = memory ? new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE) : new ConsoleMetricExporter();
  // In memory, metrics are exported when /mcp-kit/otel asks for them.
  const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: memory ? 3_600_000 : 10_000 });
  metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
  const spanExporter = memory ? new InMemorySpanExporter() : new ConsoleSpanExporter();
  const spanProcessor = memory ? new SimpleSpanProcessor(spanExporter) : new BatchSpanProcessor(spanExporter);
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [spanProcessor] }));
  if (memory) {
    const holder: MemoryTelemetry = {
      reader,
      metrics: metricExporter as InMemoryMetricExporter,
      spans: spanExporter as InMemorySpanExporter,
    };
    (globalThis as Record<symbol, unknown>)[MEMORY_TELEMETRY] = holder;
  }
  console.log(`next-example: OpenTelemetry SDK with ${mode} exporters`);
}
