import type { JSONRPCMessage, RequestId } from '../ports/mcp.js';
import { eventId } from '../events/ids.js';
import { isStreamGap, isStreamTakenOver, type EventStore, type StreamKey } from '../ports/event-store.js';
import type { CloseReason } from '../telemetry/events.js';
import type { TelemetryHub } from '../telemetry/hub.js';
import { asError } from '../util/errors.js';
import { failureOf, retriedWhile, withBriefRetries } from '../util/retry.js';
import type { SseConnection } from './connection.js';
import { messageEvent, primingEvent } from './frames.js';

const RESOLVED: Promise<void> = Promise.resolve();

/** What a stream's appends report to the session that owns it. */
export interface AppendHooks {
  onError(error: Error): void;
  /** The final frame was stored (or given up on) and written. */
  onFinal(stream: Stream): void;
  /**
   * An outage held more than `maxUnstoredBytes` of the stream's frames: its calls must end (once
   * per stream). Their answers are still appended, and stored once the store is back.
   */
  onLost(stream: Stream): void;
  /** The store refused a frame for good ({@link StreamTakenOver}): the stream's calls must stop (once per stream). */
  onTakenOver(stream: Stream): void;
  /**
   * The store lost frames it had acknowledged ({@link isStreamGap}): nothing later but the final
   * frame can be stored (past the gap, where the store can: `appendFinalAfterLoss`), so the
   * stream's calls must end (once per stream); a resume on any instance hears their answers.
   */
  onStoreLost(stream: Stream): void;
  /** Frames waiting through an outage are given up on once this says so (the session ended). */
  abandoned(): boolean;
  maxUnstoredBytes: number;
  telemetry: TelemetryHub;
}

/** JSON-response mode: the answers of a POST, gathered until the last one arrives. */
export interface JsonReply {
  messages: JSONRPCMessage[];
  batch: boolean;
  /** The body of the answers; `undefined` when there are none (every request was cancelled). */
  respond(body: string | undefined): void;
}

/**
 * A logical SSE stream: the response stream of one POST, or the session's standalone GET stream.
 * It has an id (the token in its event ids) and a sequence; connections come and go beneath it,
 * and every frame of a resumable stream is stored before it is written to the one attached now.
 */
export class Stream {
  /** Sequence number of the last frame assigned. */
  seq = 0;
  /** The final frame was written (or stored): the request got its answer. */
  complete = false;
  /** The retry the last closeSSEStream asked for; resumed streams repeat it so the pace sticks. */
  retryMs: number | undefined;
  /** When the server last let go of the client's connection (closeSSEStream). */
  closedAt: number | undefined;
  /** Requests answered on it while no connection was attached: the client reads them from the store. */
  answeredAway: RequestId[] | undefined;
  /** The store's key for this stream. */
  readonly key: StreamKey;
  /** JSON-response mode only. */
  readonly json: JsonReply | undefined;
  private conn: SseConnection | undefined;
  /** Pending store writes, when the store is asynchronous; frames go out in order behind it. */
  private tail: Promise<void> | undefined;
  /** A frame of it could not be stored: later ones are tried once, and the client reads what the store has. */
  private broken = false;
  /** The last frame the store acknowledged (they are stored in order). */
  private storedSeq = 0;
  /** Bytes of frames handed to the store and not stored yet: through an outage they wait here, in order. */
  private unstoredBytes = 0;
  /** More than `maxUnstoredBytes` waited through an outage: its calls were ended; notifications are dropped. */
  lost = false;
  /** The store lost frames of it that it had acknowledged: only the final frame is stored now, past the gap. */
  private storeLost = false;

  constructor(
    readonly id: string,
    sessionId: string | undefined,
    readonly kind: 'request' | 'standalone',
    /** Requests whose responses are still due on this stream. */
    readonly pending: Set<RequestId>,
    /** Frames carry ids and are stored, so the stream can be resumed. */
    readonly resumable: boolean,
    /** SEP-1699: the client gets a priming event and comes back after the server closes the stream. */
    public polling: boolean,
    json?: JsonReply,
  ) {
    this.key = { sessionId: sessionId as string, streamId: id };
    this.json = json;
  }

  /**
   * Registers the stream with the store (with the requests it answers). An asynchronous store that
   * failed gets a few more tries before the request is refused: registering is idempotent.
   */
  register(store: EventStore): void | Promise<void> {
    const create = () => store.createStream(this.key, this.kind === 'request' ? this.pending : undefined);
    const created = create();
    return created === undefined ? undefined : withBriefRetries(create, created);
  }

  /** Whether a store write is still on its way (an asynchronous store). */
  get storing(): boolean {
    return this.tail !== undefined;
  }

  /** Runs `fn` once every frame handed to the store so far has been stored (and written). */
  afterStored(fn: () => void): Promise<void> {
    return (this.tail ?? RESOLVED).then(fn);
  }

  /** The priming event for a connection that starts after frame `seq`. */
  priming(seq: number, retryMs: number): string {
    return primingEvent(eventId(this.id, seq), retryMs);
  }

  /** The connection attached now, if any. */
  get connection(): SseConnection | undefined {
    return this.conn;
  }

  /**
   * Puts `conn` under the stream and returns the connection it replaces. A connection whose client
   * left while we read the store replaces nothing: it must not push out a newer, live one.
   */
  attach(conn: SseConnection): SseConnection | undefined {
    if (conn.closed) return undefined;
    const previous = this.conn;
    this.conn = conn;
    return previous === conn ? undefined : previous;
  }

  /** The connection went away; the stream lives on. */
  detach(conn: SseConnection): void {
    if (this.conn === conn) this.conn = undefined;
  }

  /** Ends the attached connection; with `retryMs`, as a server close the client comes back from. */
  endConnection(retryMs: number | undefined, reason?: CloseReason): void {
    this.conn?.end(retryMs, reason);
  }

  /**
   * SEP-1699 close: `retry:` then end the connection; the stream lives on and keeps storing
   * events. In a cluster the client may be following it from another instance: that tail ends too.
   * `false` when the client does not poll (it would not come back).
   */
  close(retryMs: number | undefined, options: { retryMs: number; eventStore: EventStore; onError(error: Error): void }): boolean {
    if (!this.polling) return false;
    if (retryMs !== undefined) this.retryMs = retryMs;
    const retry = retryMs ?? this.retryMs ?? options.retryMs;
    // When the client comes back, the telemetry reports how long it stayed away.
    if (this.conn && !this.conn.closed) this.closedAt = Date.now();
    this.conn?.end(retry);
    const store = options.eventStore;
    if (store.closeTails && this.resumable && this.key.sessionId !== undefined) {
      const seq = this.seq;
      // Behind the appends still in flight, so a tail delivers every frame sent before the close.
      this.afterStored(() => store.closeTails!(this.key, seq, retry)).catch((error: unknown) =>
        options.onError(asError(error, 'event store closeTails failed')),
      );
    }
    return true;
  }

  /** Writes a frame that is not stored (a stream nobody can resume). */
  writeUnstored(json: string): void {
    this.conn?.write(messageEvent(undefined, json));
  }

  /**
   * Assigns the next id to a message, stores the frame, then writes it; after writing the final
   * frame it calls `onFinal`. With a synchronous store this all happens now; with an asynchronous
   * one frames go out in order, each only once stored. A store write that fails is tried again,
   * backing off to once a second, for as long as the outage lasts (a Redis restart or a failover
   * outlasts any budget of a few seconds; invariant: come-back-later), the frames behind it waiting in order; past
   * `maxUnstoredBytes` waiting, the stream's calls are ended ({@link AppendHooks.onLost}). A frame
   * the store does not take is never written to the wire, since a client that saw it could not
   * resume past it without a gap: a client comes back and reads it from the store once it is there.
   */
  append(store: EventStore, json: string, final: boolean, hooks: AppendHooks): Promise<void> {
    const seq = ++this.seq;
    // Past a loss a notification cannot be stored, nor sent: no resume could carry on after it.
    if (this.storeLost && !final) return RESOLVED;
    const frame = messageEvent(eventId(this.id, seq), json);
    const { telemetry } = hooks;
    if (telemetry.on) {
      telemetry.emit({
        type: 'event',
        at: Date.now(),
        session: telemetry.hash(this.key.sessionId),
        stream: telemetry.hash(this.id),
        seq,
        bytes: frame.length,
      });
    }
    const pastLoss = () => this.storeLost && final && store.appendFinalAfterLoss !== undefined;
    const attempt = (): void | Promise<void> =>
      pastLoss() ? store.appendFinalAfterLoss!(this.key, seq, frame) : store.append(this.key, seq, frame, final);
    let stored: void | Promise<void>;
    try {
      stored = attempt();
    } catch (error) {
      stored = Promise.reject(error);
    }
    if (stored === undefined && this.tail === undefined) {
      this.storedSeq = seq;
      this.conn?.write(frame, seq);
      if (final) hooks.onFinal(this);
      return RESOLVED;
    }
    this.unstoredBytes += frame.length;
    if (this.unstoredBytes > hooks.maxUnstoredBytes && !this.lost) {
      this.lost = true;
      // Not from inside this append: ending the calls appends their answers.
      queueMicrotask(() => hooks.onLost(this));
    }
    // Settled now, so a write that fails before the frames ahead of it are out is never unhandled.
    const first = failureOf(stored);
    const goOn = (error: unknown) => (!this.broken || pastLoss()) && !isStreamTakenOver(error) && !hooks.abandoned();
    const tail = (this.tail ?? RESOLVED)
      .then(() => first)
      .then((error) =>
        // A gap the first try saw may be the frame before still on its way; one a retry sees is not.
        error === undefined || !goOn(error) ? error : retriedWhile(attempt, error, (e) => goOn(e) && (e === error || !this.lostByStore(e))),
      )
      .then((error) => {
        if (error === undefined || !this.lostByStore(error)) return error;
        this.storeLost = true;
        // The call's end, at least, reaches its client: stored past the gap, where the store can.
        return pastLoss() ? retriedWhile(attempt, error, goOn) : error;
      })
      .then((error) => {
        this.unstoredBytes -= frame.length;
        if (error === undefined) {
          this.storedSeq = seq;
          this.conn?.write(frame, seq);
        } else this.unstored(error, hooks);
        if (final) hooks.onFinal(this);
        if (this.tail === tail) this.tail = undefined;
      });
    this.tail = tail;
    return tail;
  }

  /** A frame the store would not take: not sent; the client resumes from what the store has. */
  private unstored(error: unknown, hooks: AppendHooks): void {
    const first = !this.broken;
    this.broken = true;
    this.conn?.end(this.conn.pace ?? this.retryMs, 'server-close');
    if (!first) return;
    if (isStreamTakenOver(error)) hooks.onTakenOver(this);
    else if (this.lostByStore(error)) {
      // The client reads what is left from the store, then its calls' answers: stored past the gap
      // (appendFinalAfterLoss), or told by this instance where the store cannot.
      this.conn = undefined;
      hooks.onStoreLost(this);
    } else hooks.onError(asError(error, 'event store append failed until its session ended; frame not sent'));
  }

  /** A gap the store reports before a frame it had acknowledged: it lost data, for good. */
  private lostByStore(error: unknown): boolean {
    return isStreamGap(error) && error.missingSeq <= this.storedSeq;
  }
}
