import type { RequestEvent, StreamCloseEvent, StreamKind, StreamOpenEvent } from './events.js';

/** One SSE connection as the instrumentation follows it, from `stream.open` to `stream.close`. */
export interface ConnectionRecord<S> {
  session: string;
  stream: string;
  kind: StreamKind;
  at: number;
  open: StreamOpenEvent;
  /** Set once the connection closed. */
  close?: StreamCloseEvent;
  /** The span of the HTTP request this connection answers, once paired. */
  span?: S;
}

/** An MCP request whose answer travels on a stream: from its POST until a connection of the stream completes. */
export interface Operation {
  at: number;
  session: string;
  mcpMethod: string;
  tool?: string;
  era?: 'legacy' | 'modern';
}

/** How long a connection may wait for the request it answers to be reported (a replay can wait for `drain`). */
const PAIRING_WINDOW_MS = 60_000;
const MAX_PENDING = 512;
const MAX_OPERATIONS = 10_000;

/**
 * Pairs each HTTP request with the SSE connection that answers it. The engine reports a
 * connection when it opens (inside the request) and the request once its response has started,
 * with no id in common, so a request claims the oldest unclaimed connection of a matching kind,
 * of its session (an `initialize` has none yet), that opened while it was being served. Also
 * remembers, per stream, the MCP request it carries, so a resumed connection can be named after it
 * and the request's duration measured until a connection of its stream completes.
 */
export class ConnectionBook<S> {
  /** Open connections by stream (a replaced connection may overlap its successor). */
  private readonly open = new Map<string, ConnectionRecord<S>[]>();
  /** Connections not yet claimed by their request, oldest first. */
  private pending: ConnectionRecord<S>[] = [];
  private readonly operations = new Map<string, Operation>();

  opened(event: StreamOpenEvent): ConnectionRecord<S> {
    const record: ConnectionRecord<S> = { session: event.session, stream: event.stream, kind: event.kind, at: event.at, open: event };
    const list = this.open.get(event.stream);
    if (list) list.push(record);
    else this.open.set(event.stream, [record]);
    this.pending.push(record);
    this.prune(event.at);
    return record;
  }

  /** The connection that closed (the oldest open one of its stream and kind), if it was seen opening. */
  closed(event: StreamCloseEvent): ConnectionRecord<S> | undefined {
    const list = this.open.get(event.stream);
    if (!list) return undefined;
    const i = list.findIndex((r) => r.kind === event.kind);
    if (i === -1) return undefined;
    const [record] = list.splice(i, 1);
    if (list.length === 0) this.open.delete(event.stream);
    record!.close = event;
    return record;
  }

  /** The connection that answers `request`, if one opened while it was served. */
  claim(request: RequestEvent): ConnectionRecord<S> | undefined {
    if (request.status !== 200 || (request.httpMethod !== 'POST' && request.httpMethod !== 'GET')) return undefined;
    const until = request.at + request.durationMs + 1;
    const i = this.pending.findIndex(
      (r) =>
        r.at >= request.at - 1 &&
        r.at <= until &&
        (request.httpMethod === 'POST' ? r.kind === 'post' : r.kind !== 'post') &&
        (request.session === undefined || r.session === request.session),
    );
    if (i === -1) return undefined;
    return this.pending.splice(i, 1)[0];
  }

  startOperation(stream: string, operation: Operation): void {
    if (this.operations.size >= MAX_OPERATIONS) this.operations.delete(this.operations.keys().next().value!);
    this.operations.set(stream, operation);
  }

  operationOf(stream: string): Operation | undefined {
    return this.operations.get(stream);
  }

  /** The stream's answer went out: its operation is over. */
  finishOperation(stream: string): Operation | undefined {
    const operation = this.operations.get(stream);
    if (operation) this.operations.delete(stream);
    return operation;
  }

  /** A session ended: its unanswered operations never will be. */
  sessionClosed(session: string): void {
    for (const [stream, operation] of this.operations) if (operation.session === session) this.operations.delete(stream);
  }

  /** Unclaimed connections are kept for a while only (their request may never be reported, e.g. a remote tail's). */
  private prune(now: number): void {
    let drop = 0;
    while (drop < this.pending.length && (this.pending.length - drop > MAX_PENDING || now - this.pending[drop]!.at > PAIRING_WINDOW_MS))
      drop++;
    if (drop > 0) this.pending = this.pending.slice(drop);
  }
}
