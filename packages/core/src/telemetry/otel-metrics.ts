import type { Attributes, BatchObservableCallback, Counter, Histogram, Meter, Observable, UpDownCounter } from '@opentelemetry/api';
import type { EngineEvent, StreamCloseEvent, StreamOpenEvent } from './events.js';
import {
  ATTR,
  AWAY_BUCKETS,
  LIFETIME_BUCKETS,
  OPERATION_BUCKETS,
  REPLAY_BUCKETS,
  STORE_BUCKETS,
  type LabelPolicy,
} from './otel-conventions.js';
import type { Operation } from './otel-connections.js';

/** What the metrics read from the handler when they are collected. */
export interface SessionCounts {
  sessionCount: number;
  hibernatedSessionCount: number;
}

/** Statuses after which a task changes no more. */
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
const MAX_TASKS = 10_000;

/**
 * The instruments, and how each engine event moves them. The hottest event (a stored frame) only
 * bumps two numbers, read by an observable counter when the SDK collects.
 */
export class OtelMetrics {
  private readonly requests: Counter;
  private readonly operationDuration: Histogram;
  private readonly sessionDuration: Histogram;
  private readonly hibernations: Counter;
  private readonly wakeDuration: Histogram;
  private readonly connections: UpDownCounter;
  private readonly connectionDuration: Histogram;
  private readonly closes: Counter;
  private readonly resumes: Counter;
  private readonly replayedEvents: Counter;
  private readonly replaySize: Histogram;
  private readonly replayCount: Histogram;
  private readonly awayTime: Histogram;
  private readonly evicted: Counter;
  private readonly forwards: Counter;
  private readonly storeDuration: Histogram;
  private readonly tasks: UpDownCounter;
  private readonly taskChanges: Counter;
  private readonly observed: { callback: BatchObservableCallback; instruments: Observable[] };
  private stored = 0;
  private storedBytes = 0;
  /** When each open session opened (sessions opened before instrumenting are not timed). */
  private readonly sessionsOpenedAt = new Map<string, number>();
  /** The status of each task not yet finished. */
  private readonly taskStatus = new Map<string, string>();

  constructor(
    private readonly meter: Meter,
    private readonly labels: LabelPolicy,
    handler: SessionCounts,
    private readonly storeImplementation: { events: string; tasks: string },
  ) {
    const counter = (name: string, unit: string, description: string) => meter.createCounter(name, { unit, description });
    const histogram = (name: string, unit: string, description: string, boundaries: number[]) =>
      meter.createHistogram(name, { unit, description, advice: { explicitBucketBoundaries: boundaries } });
    this.requests = counter('mcp_kit.requests', '{request}', 'HTTP requests to the MCP endpoint, by protocol era, MCP method and status');
    this.operationDuration = histogram(
      'mcp.server.operation.duration',
      's',
      'MCP request or notification duration, from its POST until its answer was sent (across resumed streams)',
      OPERATION_BUCKETS,
    );
    this.sessionDuration = histogram(
      'mcp.server.session.duration',
      's',
      'How long MCP sessions lasted, by why they ended',
      LIFETIME_BUCKETS,
    );
    this.hibernations = counter(
      'mcp_kit.session.hibernations',
      '{session}',
      'Sessions whose server was let go while idle (hibernateAfterMs)',
    );
    this.wakeDuration = histogram('mcp_kit.session.wake.duration', 's', 'Time to bring a hibernated session back', STORE_BUCKETS);
    this.connections = meter.createUpDownCounter('mcp_kit.sse.connections', {
      unit: '{connection}',
      description:
        'Open SSE connections by kind: post (a request), get (standalone), resume, remote (a resume followed from another instance)',
    });
    this.connectionDuration = histogram('mcp_kit.sse.connection.duration', 's', 'How long SSE connections stayed open', LIFETIME_BUCKETS);
    this.closes = counter(
      'mcp_kit.sse.closes',
      '{connection}',
      'SSE connections ended, by why: complete, server-close (closeSSEStream), slow-reader, replaced, duration, shutdown, client',
    );
    this.resumes = counter('mcp_kit.resumes', '{resume}', 'Streams resumed with GET + Last-Event-ID');
    this.replayedEvents = counter('mcp_kit.events.replayed', '{event}', 'Stored events replayed to resuming clients');
    this.replaySize = histogram(
      'mcp_kit.resume.replay.size',
      'By',
      'Bytes replayed per resume',
      [0, 256, 1024, 4096, 16_384, 65_536, 262_144, 1_048_576, 4_194_304],
    );
    this.replayCount = histogram('mcp_kit.resume.replay.events', '{event}', 'Events replayed per resume', REPLAY_BUCKETS);
    this.awayTime = histogram(
      'mcp_kit.resume.away_time',
      's',
      'How long a client stayed away between a server close and its resume: the polling interval clients really use',
      AWAY_BUCKETS,
    );
    this.evicted = counter('mcp_kit.cursor.evicted', '{response}', 'Resumes refused with 410 because the store evicted their events');
    this.forwards = counter('mcp_kit.forwards', '{request}', "Requests forwarded to the instance that owns the request's session");
    this.storeDuration = histogram('mcp_kit.store.duration', 's', 'Event and task store calls the engine waits for', STORE_BUCKETS);
    this.tasks = meter.createUpDownCounter('mcp_kit.tasks', {
      unit: '{task}',
      description: 'Tasks (2026-07-28 Tasks extension) not yet finished, by status',
    });
    this.taskChanges = counter('mcp_kit.task.status_changes', '{task}', 'Task status changes, by the status taken');
    this.observed = this.observeCounts(meter, handler);
  }

  stop(): void {
    this.meter.removeBatchObservableCallback(this.observed.callback, this.observed.instruments);
  }

  /** What is read when the SDK collects: session counts from the handler, and the stored-event totals. */
  private observeCounts(meter: Meter, handler: SessionCounts): { callback: BatchObservableCallback; instruments: Observable[] } {
    const sessions = meter.createObservableUpDownCounter('mcp_kit.sessions', {
      unit: '{session}',
      description: 'Open sessions, awake or hibernated',
    });
    const stored = meter.createObservableCounter('mcp_kit.events.stored', { unit: '{event}', description: 'SSE events stored for replay' });
    const storedSize = meter.createObservableCounter('mcp_kit.events.stored.size', {
      unit: 'By',
      description: 'Bytes of SSE events stored',
    });
    const callback: BatchObservableCallback = (result) => {
      const hibernated = handler.hibernatedSessionCount;
      result.observe(sessions, handler.sessionCount - hibernated, { [ATTR.sessionState]: 'awake' });
      result.observe(sessions, hibernated, { [ATTR.sessionState]: 'hibernated' });
      result.observe(stored, this.stored);
      result.observe(storedSize, this.storedBytes);
    };
    const instruments = [sessions, stored, storedSize];
    meter.addBatchObservableCallback(callback, instruments);
    return { callback, instruments };
  }

  /** Every event but the ones about requests and connections, which need the pairing (see otel.ts). */
  record(event: EngineEvent): void {
    switch (event.type) {
      case 'event':
        this.stored++;
        this.storedBytes += event.bytes;
        return;
      case 'session.open':
        this.sessionsOpenedAt.set(event.session, event.at);
        return;
      case 'session.close':
        return this.sessionClosed(event.session, event.reason, event.at);
      case 'session.hibernate':
        return this.hibernations.add(1);
      case 'session.wake':
        return this.wakeDuration.record(event.ms / 1000);
      case 'cursor.evicted':
        return this.evicted.add(1);
      case 'forward':
        return this.forwards.add(1);
      case 'store':
        return this.storeDuration.record(event.ms / 1000, {
          [ATTR.store]: event.store,
          [ATTR.storeOperation]: event.op,
          [ATTR.storeImplementation]: this.storeImplementation[event.store],
          ...(event.ok ? {} : { [ATTR.errorType]: 'store_error' }),
        });
      case 'task':
        return this.taskStatusChanged(event.task, event.status);
    }
  }

  request(attributes: Attributes): void {
    this.requests.add(1, attributes);
  }

  operation(operation: Operation, endedAt: number, errorStatus?: number): void {
    // The conventions' network.* attributes would be the same on every point (HTTP over TCP): spans carry them.
    const attributes: Attributes = { [ATTR.mcpMethod]: this.labels.method(operation.mcpMethod) };
    if (operation.era) attributes[ATTR.era] = operation.era;
    if (operation.tool !== undefined) {
      attributes[ATTR.toolName] = this.labels.tool(operation.tool);
      attributes[ATTR.operationName] = 'execute_tool';
    }
    if (errorStatus !== undefined) attributes[ATTR.errorType] = String(errorStatus);
    this.operationDuration.record(Math.max(0, endedAt - operation.at) / 1000, attributes);
  }

  connectionOpened(event: StreamOpenEvent): void {
    const kind = this.kindAttributes(event.kind);
    this.connections.add(1, kind);
    if (event.kind !== 'resume' && event.kind !== 'remote') return;
    this.resumes.add(1, kind);
    const replayed = event.replayed ?? 0;
    this.replayedEvents.add(replayed, kind);
    this.replayCount.record(replayed, kind);
    this.replaySize.record(event.replayBytes ?? 0, kind);
    if (event.awayMs !== undefined) this.awayTime.record(event.awayMs / 1000, kind);
  }

  connectionClosed(event: StreamCloseEvent, openedAt: number | undefined): void {
    this.connections.add(-1, this.kindAttributes(event.kind));
    const key = `${event.kind} ${event.reason}`;
    let attributes = this.closeAttributes.get(key);
    if (!attributes) this.closeAttributes.set(key, (attributes = { [ATTR.streamKind]: event.kind, [ATTR.closeReason]: event.reason }));
    this.closes.add(1, attributes);
    if (openedAt !== undefined) this.connectionDuration.record(Math.max(0, event.at - openedAt) / 1000, attributes);
  }

  /** Attribute sets of connections, built once each: a few kinds and reasons, recorded on every connection. */
  private readonly kinds = new Map<string, Attributes>();
  private readonly closeAttributes = new Map<string, Attributes>();

  private kindAttributes(kind: string): Attributes {
    let attributes = this.kinds.get(kind);
    if (!attributes) this.kinds.set(kind, (attributes = { [ATTR.streamKind]: kind }));
    return attributes;
  }

  private sessionClosed(session: string, reason: string, at: number): void {
    const openedAt = this.sessionsOpenedAt.get(session);
    if (openedAt === undefined) return;
    this.sessionsOpenedAt.delete(session);
    const attributes: Attributes = { [ATTR.sessionEnd]: reason };
    if (reason === 'error') attributes[ATTR.errorType] = 'session_error';
    this.sessionDuration.record(Math.max(0, at - openedAt) / 1000, attributes);
  }

  private taskStatusChanged(task: string, status: string): void {
    this.taskChanges.add(1, { [ATTR.taskStatus]: status });
    const before = this.taskStatus.get(task);
    if (before === status) return;
    if (before !== undefined) this.tasks.add(-1, { [ATTR.taskStatus]: before });
    if (TERMINAL.has(status)) {
      this.taskStatus.delete(task);
      return;
    }
    // Bounded: past the cap a task is counted but not followed (its end will not be seen).
    if (this.taskStatus.size >= MAX_TASKS) return;
    this.taskStatus.set(task, status);
    this.tasks.add(1, { [ATTR.taskStatus]: status });
  }
}
