/**
 * The OpenTelemetry SDK with in-memory exporters, and what it recorded as plain JSON: the same
 * shape the Next example's `/mcp-kit/otel` route answers with when started with MCP_KIT_OTEL=memory,
 * so one set of assertions reads both.
 */
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';

export type Attrs = Record<string, string | number | boolean | undefined>;

export interface PointSnapshot {
  attributes: Attrs;
  /** A sum or gauge's value, or a histogram's count, sum, min and max. */
  value: number | { count: number; sum: number; min?: number; max?: number };
}

export interface TelemetrySnapshot {
  metrics: Record<string, { unit: string; points: PointSnapshot[] }>;
  spans: Array<{
    name: string;
    kind: number;
    scope: string;
    attributes: Attrs;
    status: number;
    startMs: number;
    endMs: number;
    parentSpanId?: string;
  }>;
}

export function metricsSnapshot(data: MetricData[]): TelemetrySnapshot['metrics'] {
  const out: TelemetrySnapshot['metrics'] = {};
  for (const metric of data) {
    const points = metric.dataPoints.map((p) => {
      const v = p.value as number | { count: number; sum?: number; min?: number; max?: number };
      return {
        attributes: p.attributes as Attrs,
        value: typeof v === 'number' ? v : { count: v.count, sum: v.sum ?? 0, min: v.min, max: v.max },
      };
    });
    out[metric.descriptor.name] = { unit: metric.descriptor.unit, points };
  }
  return out;
}

export function spansSnapshot(spans: ReadableSpan[]): TelemetrySnapshot['spans'] {
  const ms = ([s, ns]: [number, number]) => s * 1000 + ns / 1e6;
  return spans.map((s) => ({
    name: s.name,
    kind: s.kind,
    scope: s.instrumentationScope.name,
    attributes: s.attributes as Attrs,
    status: s.status.code,
    startMs: ms(s.startTime),
    endMs: ms(s.endTime),
    parentSpanId: s.parentSpanContext?.spanId,
  }));
}

/** A meter and a tracer provider that keep everything in memory, read with `snapshot()`. */
export function createMemoryTelemetry() {
  const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  // Exported when the test asks (forceFlush), not on a timer.
  const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const spanExporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spanExporter)] });
  return {
    meterProvider,
    tracerProvider,
    async snapshot(): Promise<TelemetrySnapshot> {
      await reader.forceFlush();
      const latest = metricExporter.getMetrics().at(-1);
      metricExporter.reset();
      const data = latest?.scopeMetrics.flatMap((s) => s.metrics) ?? [];
      return { metrics: metricsSnapshot(data), spans: spansSnapshot(spanExporter.getFinishedSpans()) };
    },
    async shutdown(): Promise<void> {
      await meterProvider.shutdown();
      await tracerProvider.shutdown();
    },
  };
}

/** The points of `name` whose attributes include `match`. */
export function points(snapshot: TelemetrySnapshot, name: string, match: Attrs = {}): PointSnapshot[] {
  const metric = snapshot.metrics[name];
  if (!metric) return [];
  return metric.points.filter((p) => Object.entries(match).every(([k, v]) => p.attributes[k] === v));
}

/** A counter's total over the points that match (a histogram's count). */
export function total(snapshot: TelemetrySnapshot, name: string, match: Attrs = {}): number {
  let sum = 0;
  for (const p of points(snapshot, name, match)) sum += typeof p.value === 'number' ? p.value : p.value.count;
  return sum;
}

/** A histogram's points that match, merged. */
export function histogram(
  snapshot: TelemetrySnapshot,
  name: string,
  match: Attrs = {},
): { count: number; sum: number; min: number; max: number } {
  const out = { count: 0, sum: 0, min: Infinity, max: -Infinity };
  for (const p of points(snapshot, name, match)) {
    if (typeof p.value === 'number') continue;
    out.count += p.value.count;
    out.sum += p.value.sum;
    out.min = Math.min(out.min, p.value.min ?? Infinity);
    out.max = Math.max(out.max, p.value.max ?? -Infinity);
  }
  return out;
}
