// The kit-express-otel row: mcp-kit recorded by `@mcp-kit/core/otel` into the OpenTelemetry SDK,
// with in-memory exporters, as an application would run it with a real exporter: metrics read
// every second, spans batched. What the exporters hold is dropped every second, so the process's
// memory stays flat and the cost measured is recording and exporting, not an ever-growing array.
import { instrumentOpenTelemetry } from '@mcp-kit/core/otel';
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, BatchSpanProcessor, InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';

export function instrumentWithMemorySdk(handler) {
  const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 1_000 });
  const spanExporter = new InMemorySpanExporter();
  // Room for every span of a busy second: the defaults (2,048 queued) would drop most under load.
  const spans = new BatchSpanProcessor(spanExporter, { maxQueueSize: 65_536, maxExportBatchSize: 8_192, scheduledDelayMillis: 500 });
  const timer = setInterval(() => {
    metricExporter.reset();
    spanExporter.reset();
  }, 1_000);
  timer.unref();
  return instrumentOpenTelemetry(handler, {
    meterProvider: new MeterProvider({ readers: [reader] }),
    tracerProvider: new BasicTracerProvider({ spanProcessors: [spans] }),
  });
}
