// `@mcp-kit/core/otel`: the engine's events as OpenTelemetry metrics and spans. A subpath of its
// own, so `@opentelemetry/api` (an optional peer dependency) is loaded only by applications that
// import it: the main entry never imports it, and an engine nobody observes builds no events.
import {
  context,
  metrics,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type MeterProvider,
  type Span,
  type Tracer,
  type TracerProvider,
} from '@opentelemetry/api';
import type { McpHandler } from '../handler.js';
import type { EngineEvent, RequestEvent, StreamCloseEvent } from './events.js';
import { ConnectionBook, type ConnectionRecord, type Operation } from './otel-connections.js';
import { ATTR, LabelPolicy, SCOPE } from './otel-conventions.js';
import { OtelMetrics } from './otel-metrics.js';

export interface OpenTelemetryOptions {
  /** Where the metrics go. Default: the global one (`metrics.getMeterProvider()`), as set by the SDK. */
  meterProvider?: MeterProvider;
  /** Where the spans go. Default: the global one (`trace.getTracerProvider()`). */
  tracerProvider?: TracerProvider;
  /** Record metrics. Default `true`. */
  metrics?: boolean;
  /** Record one span per HTTP request. Default `true`. */
  traces?: boolean;
  /** Tool names kept as metric attribute values; later ones are recorded as `_OTHER`. Default `100`. */
  maxToolNames?: number;
  /**
   * `mcp_kit.store.implementation` of the event and task stores. Default: their class names
   * (`MemoryEventStore`, `RedisEventStore`, …), or `custom` where a minifier renamed them (a Next.js
   * production build does).
   */
  storeNames?: { events?: string; tasks?: string };
}

/**
 * Records what `handler` does as OpenTelemetry metrics (sessions awake and hibernated, SSE
 * connections, events stored and replayed, resumes and how long clients stayed away, 410s,
 * slow-reader cuts, forwards, store latency, tasks, requests per protocol era) and one span per
 * HTTP request (MCP method, tool, era, the session id only as a salted hash). Call it once the
 * OpenTelemetry SDK is set up; returns the function that stops recording. Names, units and
 * attributes: see docs/observability.md.
 *
 * @example
 * ```ts source="../../examples/otel.examples.ts#instrumentOpenTelemetry"
 * const mcp = createMcpHandler({ server: () => buildServer() });
 * instrumentOpenTelemetry(mcp); // after the OpenTelemetry SDK registered its providers
 * ```
 */
export function instrumentOpenTelemetry(handler: McpHandler, options: OpenTelemetryOptions = {}): () => void {
  const instrumentation = new Instrumentation(handler, options);
  const unsubscribe = handler.observe((event) => instrumentation.record(event));
  return function stopOpenTelemetry() {
    unsubscribe();
    instrumentation.stop();
  };
}

class Instrumentation {
  private readonly labels: LabelPolicy;
  private readonly metrics: OtelMetrics | undefined;
  private readonly tracer: Tracer | undefined;
  private readonly book = new ConnectionBook<Span>();

  constructor(handler: McpHandler, options: OpenTelemetryOptions) {
    this.labels = new LabelPolicy(options.maxToolNames ?? 100);
    if (options.metrics !== false) {
      const meter = (options.meterProvider ?? metrics.getMeterProvider()).getMeter(SCOPE);
      const stores = {
        events: options.storeNames?.events ?? nameOf(handler.options.eventStore),
        tasks: options.storeNames?.tasks ?? nameOf(handler.options.taskStore),
      };
      this.metrics = new OtelMetrics(meter, this.labels, handler, stores);
    }
    if (options.traces !== false) this.tracer = (options.tracerProvider ?? trace.getTracerProvider()).getTracer(SCOPE);
  }

  stop(): void {
    this.metrics?.stop();
  }

  record(event: EngineEvent): void {
    switch (event.type) {
      case 'request':
        return this.request(event);
      case 'stream.open': {
        this.book.opened(event);
        return this.metrics?.connectionOpened(event);
      }
      case 'stream.close':
        return this.connectionClosed(event);
      case 'session.close':
        this.book.sessionClosed(event.session);
        return this.metrics?.record(event);
      default:
        return this.metrics?.record(event);
    }
  }

  /**
   * A request's response started. Runs inside the request's own call (the engine reports it
   * there), so the span's parent is whatever span is active for it: an HTTP instrumentation's, or
   * Next.js's.
   */
  private request(event: RequestEvent): void {
    const connection = this.book.claim(event);
    const attributes = this.requestAttributes(event, connection);
    this.metrics?.request(attributes);
    const operation = this.operationOf(event, connection);
    if (this.tracer) this.startSpan(this.tracer, event, connection, attributes, operation);
  }

  /** The MCP request a POST carries: measured until its answer went out, here or on a later connection. */
  private operationOf(event: RequestEvent, connection: ConnectionRecord<Span> | undefined): Operation | undefined {
    if (event.httpMethod === 'GET' && connection) return this.book.operationOf(connection.stream);
    if (event.mcpMethod === undefined) return undefined;
    const operation: Operation = {
      at: event.at,
      session: connection?.session ?? event.session ?? '',
      mcpMethod: event.mcpMethod,
      tool: event.tool,
      era: event.era,
    };
    if (connection && connection.kind === 'post') {
      if (connection.close?.reason === 'complete') this.metrics?.operation(operation, connection.close.at);
      else this.book.startOperation(connection.stream, operation);
    } else if (event.status !== 0) {
      // Answered without a stream (JSON, 202, a rejection). Status 0: a 2026-era request answered
      // after its handler returned; its end is not reported, so it is not timed.
      this.metrics?.operation(operation, event.at + event.durationMs, event.status >= 400 ? event.status : undefined);
    }
    return operation;
  }

  private connectionClosed(event: StreamCloseEvent): void {
    const connection = this.book.closed(event);
    this.metrics?.connectionClosed(event, connection?.at);
    if (event.reason === 'complete') {
      const operation = this.book.finishOperation(event.stream);
      if (operation) this.metrics?.operation(operation, event.at);
    }
    if (connection?.span) endSpan(connection.span, event);
  }

  private requestAttributes(event: RequestEvent, connection: ConnectionRecord<Span> | undefined): Attributes {
    const attributes: Attributes = { [ATTR.httpMethod]: event.httpMethod };
    // GET and DELETE exist only for the sessions of the 2025 era.
    const era = event.era ?? (event.httpMethod === 'POST' ? undefined : 'legacy');
    if (era) attributes[ATTR.era] = era;
    if (event.status !== 0) attributes[ATTR.httpStatus] = event.status;
    if (event.mcpMethod !== undefined) attributes[ATTR.mcpMethod] = this.labels.method(event.mcpMethod);
    if (connection) attributes[ATTR.streamKind] = connection.kind;
    return attributes;
  }

  private startSpan(
    tracer: Tracer,
    event: RequestEvent,
    connection: ConnectionRecord<Span> | undefined,
    metricAttributes: Attributes,
    operation: Operation | undefined,
  ): void {
    const attributes: Attributes = { ...metricAttributes, [ATTR.protocolName]: 'http', [ATTR.transport]: 'tcp' };
    const mcpMethod = operation?.mcpMethod ?? event.mcpMethod;
    const tool = operation?.tool ?? event.tool;
    if (mcpMethod !== undefined) attributes[ATTR.mcpMethod] = mcpMethod;
    if (tool !== undefined) {
      attributes[ATTR.toolName] = tool;
      attributes[ATTR.operationName] = 'execute_tool';
    }
    const session = event.session ?? connection?.session;
    if (session) attributes[ATTR.mcpSession] = session;
    const open = connection?.open;
    if (open?.replayed !== undefined) {
      attributes[ATTR.replayedEvents] = open.replayed;
      attributes[ATTR.replayedBytes] = open.replayBytes ?? 0;
    }
    if (open?.awayMs !== undefined) attributes[ATTR.awayMs] = open.awayMs;
    if (event.status >= 500) attributes[ATTR.errorType] = String(event.status);
    // The MCP conventions' span name: `{mcp.method.name} {target}`, the tool being the target.
    const name = mcpMethod === undefined ? event.httpMethod : tool === undefined ? mcpMethod : `${mcpMethod} ${this.labels.tool(tool)}`;
    const span = tracer.startSpan(name, { kind: SpanKind.SERVER, startTime: event.at, attributes }, context.active());
    if (event.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    if (!connection) span.end(event.at + event.durationMs);
    else if (connection.close) endSpan(span, connection.close);
    else connection.span = span;
  }
}

/** An SSE response's span ends with its connection: why, and the retry it was sent away with. */
function endSpan(span: Span, close: StreamCloseEvent): void {
  span.setAttribute(ATTR.closeReason, close.reason);
  if (close.retryMs !== undefined) span.setAttribute(ATTR.retryMs, close.retryMs);
  span.end(close.at);
}

/** `MemoryEventStore`, `RedisEventStore`, …: which store the latency is of. */
function nameOf(store: object): string {
  const name = store.constructor?.name ?? '';
  // A minified class name says nothing.
  return name.length > 3 ? name : 'custom';
}
