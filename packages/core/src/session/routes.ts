import type { EventStore } from '../ports/event-store.js';
import type { RequestId } from '../ports/mcp.js';
import type { Stream } from '../streams/stream.js';

/** Until when a client polling every `pollIntervalMs` is expected back for an answer that waits for it: ten polls and 30 s. */
export function expectedBack(now: number, pollIntervalMs: number): number {
  return now + 10 * pollIntervalMs + 30_000;
}

/** A stream answered while its client was away (polling): until when it is expected back, and for what. */
export interface AwaitedAnswers {
  until: number;
  ids: RequestId[];
  /** The event id (sequence) under which its client was told the store lost them. */
  toldAt: number | undefined;
}

/**
 * Which stream carries what, in one session: its open streams by id (a resume names one), by the
 * request whose answer is due on it (the SDK names one in `relatedRequestId`), and the standalone
 * GET stream, which carries what belongs to no request.
 */
export class StreamRoutes {
  standalone: Stream | undefined;
  private readonly byId = new Map<string, Stream>();
  private readonly byRequest = new Map<RequestId, Stream>();
  /** Streams answered while their client was away (polling), until when it is expected back for the answer. */
  private readonly awaited = new Map<string, AwaitedAnswers>();
  /** When the server last closed streams that completed while their client was away (telemetry). */
  private readonly closedWhileAway = new Map<string, number>();
  /** Streams whose calls may outlive their response (serverless: `waitUntil`, `maxCallDurationMs`): what lets each go. */
  private outliving: Map<Stream, () => void> | undefined;

  constructor(
    /** Told each time a client fetched an answer written while it was away (a drain alone waits for that). */
    private readonly onFetched?: () => void,
  ) {}

  add(stream: Stream): Stream {
    this.byId.set(stream.id, stream);
    for (const id of stream.pending) this.byRequest.set(id, stream);
    return stream;
  }

  /** `stream`'s calls are kept alive (`waitUntil`) or bounded (`maxCallDurationMs`) until `end` is called, once it completes. */
  outlive(stream: Stream, end: () => void): void {
    (this.outliving ??= new Map()).set(stream, end);
  }

  private letLive(stream: Stream): void {
    const end = this.outliving?.get(stream);
    if (!end) return;
    this.outliving!.delete(stream);
    end();
  }

  get(streamId: string): Stream | undefined {
    return this.byId.get(streamId);
  }

  forRequest(id: RequestId): Stream | undefined {
    return this.byRequest.get(id);
  }

  get size(): number {
    return this.byId.size;
  }

  /** How much each of its maps holds (tests: bounded by what is live, invariant: bounded). */
  get retained(): { streams: number; requests: number; awaited: number; outliving: number } {
    return { streams: this.byId.size, requests: this.byRequest.size, awaited: this.awaited.size, outliving: this.outliving?.size ?? 0 };
  }

  /** An answer to `id` goes out on `stream`; `true` when it is the last one due there. */
  answer(stream: Stream, id: RequestId): boolean {
    if (!stream.pending.delete(id)) return false;
    this.byRequest.delete(id);
    if (!stream.connection) (stream.answeredAway ??= []).push(id);
    return stream.kind === 'request' && stream.pending.size === 0;
  }

  /**
   * The SDK aborts a cancelled request's handler and sends it no response, so nothing would ever
   * end its stream (or, in jsonResponse mode, its POST) or free its id: it is released as if
   * answered. The stream, if that was its last request (a falsy id is ignored, as the SDK does).
   */
  cancelled(requestId: unknown): Stream | undefined {
    if ((typeof requestId !== 'string' && typeof requestId !== 'number') || !requestId) return undefined;
    const stream = this.byRequest.get(requestId);
    if (!stream?.pending.delete(requestId)) return undefined;
    this.byRequest.delete(requestId);
    // Not answered away: its client cancelled it and does not come back for an answer.
    return stream.kind === 'request' && stream.pending.size === 0 ? stream : undefined;
  }

  /**
   * The stream got its last answer (`cancelled`: its last request was cancelled instead): it is no
   * longer open (its id stays a valid cursor in the store), and nothing more is written to it here
   * (the store is told: no final frame is stored for a cancelled one). Answers written while its
   * client was away are awaited until it comes back for them, or is overdue.
   */
  complete(stream: Stream, options: { retryMs: number; eventStore: EventStore }, cancelled = false): void {
    this.letLive(stream);
    this.byId.delete(stream.id);
    if (stream.resumable) options.eventStore.doneWriting?.(stream.key.sessionId, stream.id);
    if (stream.polling && !stream.connection && !(cancelled && stream.answeredAway === undefined)) {
      const now = Date.now();
      // Bounded by time as they come, not only when asked (see awaiting): those overdue go, oldest first.
      for (const [id, { until }] of this.awaited) {
        if (until >= now) break;
        this.awaited.delete(id);
      }
      this.awaited.set(stream.id, {
        until: expectedBack(now, stream.retryMs ?? options.retryMs),
        ids: stream.answeredAway ?? [],
        toldAt: undefined,
      });
    }
    if (stream.closedAt === undefined) return;
    // The client's last poll comes after this: keep when it was sent away (a few, oldest out).
    this.closedWhileAway.set(stream.id, stream.closedAt);
    if (this.closedWhileAway.size > 16) this.closedWhileAway.delete(this.closedWhileAway.keys().next().value!);
  }

  /** The client has read `streamId` to its end. */
  fetched(streamId: string): void {
    if (this.awaited.delete(streamId)) this.onFetched?.();
  }

  /** Whether an answer written while its client was away is still expected to be fetched. */
  awaiting(now: number): boolean {
    return this.awaitedUntil(now) !== undefined;
  }

  /** Until when the first client still expected back for an answer written while it was away is expected; `undefined`: none is. */
  awaitedUntil(now: number): number | undefined {
    let first: number | undefined;
    for (const [id, { until }] of this.awaited) {
      if (until < now) this.awaited.delete(id);
      else if (first === undefined || until < first) first = until;
    }
    return first;
  }

  /**
   * The answers a finished stream got while its client was away, until the client reads them (or
   * is overdue): what its client must hear if the store lost them.
   */
  answersAwaited(streamId: string): AwaitedAnswers | undefined {
    return this.awaited.get(streamId);
  }

  /** How long the client of `streamId` stayed away since the server closed its connection (once per close). */
  awayMs(streamId: string, now: number): number | undefined {
    const stream = this.byId.get(streamId);
    const closedAt = stream ? stream.closedAt : this.closedWhileAway.get(streamId);
    if (stream) stream.closedAt = undefined;
    else this.closedWhileAway.delete(streamId);
    return closedAt === undefined ? undefined : now - closedAt;
  }

  /** Forgets a stream that never went on the wire (the store, which may have registered it, is told). */
  remove(stream: Stream, store: EventStore): void {
    this.byId.delete(stream.id);
    store.doneWriting?.(stream.key.sessionId, stream.id);
    for (const id of stream.pending) this.byRequest.delete(id);
    if (this.standalone === stream) this.standalone = undefined;
  }

  /** A request is in flight, or a response stream is open or still storing frames. */
  get busy(): boolean {
    if (this.byRequest.size > 0) return true;
    for (const stream of this.byId.values()) if (stream.kind === 'request' || stream.storing) return true;
    return false;
  }

  /** Ends the connections of streams whose clients poll, with the stream's retry hint (they come back). */
  endPolling(retryMs: number): void {
    for (const stream of this.byId.values()) if (stream.polling) stream.endConnection(stream.retryMs ?? retryMs, 'shutdown');
  }

  /** Ends every stream's connection (with `retryMs`, as a server close) and forgets them all. */
  endAll(retryMs: number | undefined): void {
    if (this.outliving) for (const stream of [...this.outliving.keys()]) this.letLive(stream);
    for (const stream of this.byId.values()) stream.endConnection(retryMs, retryMs === undefined ? undefined : 'shutdown');
    this.byId.clear();
    this.byRequest.clear();
    this.standalone = undefined;
  }
}
