/**
 * The event store port. mcp-kit stores every SSE frame it sends on a resumable stream *before* it
 * writes it, so a client that lost the connection can `GET` with `Last-Event-ID` and get the rest.
 *
 * The engine assigns ids (`<stream token>.<seq>`), so a store only keeps frames in order per stream
 * and answers "what came after seq N". Methods may return a promise (Redis) or a plain value (the
 * memory store's synchronous fast path); the engine awaits only when it gets a promise.
 */
/**
 * What `append` throws when it refuses a frame for good, not for an outage: another instance owns
 * the stream's session now, or already answered the stream (it took over from an instance it
 * counted as gone, frozen or cut off). The writer stops retrying and stops its calls' tools, so a
 * thawed instance's tool does not run on beside the answer its client already got.
 */
export class StreamTakenOver extends Error {
  override readonly name = 'StreamTakenOver';
}

/**
 * What `append` throws for a frame whose predecessor the store does not hold; `missingSeq` is the
 * first frame missing. Passing while that frame's own write is still on its way (a writer's first
 * try of a frame goes out at once, before the retry of one before it). For good once the writer
 * had `missingSeq` acknowledged: the store lost it (a failover to a replica it had not reached,
 * replication being asynchronous), and no later frame of the stream can ever be stored (invariant:
 * no-hole). The writer tells which.
 */
export class StreamGap extends Error {
  override readonly name = 'StreamGap';
  constructor(
    message: string,
    readonly missingSeq: number,
  ) {
    super(message);
  }
}

/**
 * Whether `error` is a {@link StreamGap}, by name and field: a store's package may load another
 * copy of this one (its CommonJS build beside the app's ES module one), whose class is another.
 */
export function isStreamGap(error: unknown): error is StreamGap {
  return error instanceof Error && error.name === 'StreamGap' && typeof (error as { missingSeq?: unknown }).missingSeq === 'number';
}

/** Whether `error` is a {@link StreamTakenOver}, by name, as {@link isStreamGap}. */
export function isStreamTakenOver(error: unknown): boolean {
  return error instanceof Error && error.name === 'StreamTakenOver';
}

export interface EventStore {
  /**
   * Registers a stream before its priming event goes out, so `<token>.0` is a valid cursor.
   * `requestIds` are the requests whose answers the stream will carry (none for the GET stream): a
   * store shared by several instances keeps them for {@link unfinished}. Read them during the call:
   * the set changes as answers go out.
   */
  createStream(stream: StreamKey, requestIds?: Iterable<string | number>): void | Promise<void>;
  /**
   * Appends one serialized SSE frame. `seq` starts at 1 and grows by 1 per stream. `final` marks
   * the frame that completes the stream (the last response of a POST), which lets a replay that
   * reaches it end the resumed stream. Throws {@link StreamTakenOver} when the frame can never be
   * stored; any other failure is taken as an outage, and the write is tried again.
   */
  append(stream: StreamKey, seq: number, frame: string, final: boolean): void | Promise<void>;
  /**
   * Optional: stores the stream's final frame (`seq`) although frames before it are missing,
   * because the store lost them after acknowledging them ({@link isStreamGap}: a failover to a
   * replica they had not reached). They are gone for good; a replay across the gap answers
   * `evicted` with this frame as `final`, so a client resuming on any instance hears how its call
   * ended. Refused like `append` otherwise. A store that cannot lose what it acknowledged (the
   * memory store) needs none.
   */
  appendFinalAfterLoss?(stream: StreamKey, seq: number, frame: string): void | Promise<void>;
  /** The frames of `streamId` after `afterSeq`, if the stream belongs to `sessionId`. */
  replayAfter(sessionId: string, streamId: string, afterSeq: number): ReplayResult | Promise<ReplayResult>;
  /** Drops everything a session stored (DELETE, expiry). */
  deleteSession(sessionId: string): void | Promise<void>;
  /**
   * Optional: this instance writes nothing more to a stream, though what is stored of it stays
   * (its client, or another instance, may still read it). With `streamId`, one stream the engine
   * is done with: answered, its requests cancelled, or never put on the wire. Without, every stream
   * of a session whose copy is gone from here: the session ended (deleted, expired), or this
   * instance let it go (its cap, a drain's hand-off, a peer's take-over, a shared copy). A store that keeps what an
   * instance writes alive (the Redis store refreshes its streams' TTL) stops doing so, and what is
   * stored then ages out by the store's own retention.
   *
   * Synchronous, without I/O, and must not throw: it is called as the stream or session ends,
   * once each. The engine appends nothing more to it; a store may take a later append as making
   * the stream live again. The memory store has no such state and does not implement it.
   */
  doneWriting?(sessionId: string, streamId?: string): void;
  /**
   * Optional, for sessions restored on another instance: the session's request streams whose final
   * frame was never stored, with their last seq and the requests they carried. When the instance
   * running them died, the new owner answers those requests with an error, so no client waits forever.
   */
  unfinished?(sessionId: string): Promise<UnfinishedStream[]>;
  /**
   * Optional, for shared mode (see `SessionCopies`): the instance that writes a
   * request stream (the one the store was made for when {@link createStream} ran) and the
   * requests it carries; `undefined` when the store does not know. A resume served on another
   * instance checks that the writer still lives, and answers the call with an error when it does
   * not (it was frozen or died mid-call), so no client waits forever.
   */
  writer?(stream: StreamKey): Promise<StreamWriter | undefined>;
  /** Optional: evicts by age now. The handler calls it periodically. */
  sweep?(now: number): void;
  /** Optional: releases timers and connections. */
  close?(): void | Promise<void>;
  /**
   * Optional: follows a stream live. In cluster mode a `GET` + `Last-Event-ID` can land on an
   * instance that does not own the session; it replays with {@link replayAfter} and then calls
   * `subscribe(stream, lastSeq, listener)` to carry on with the events the owner keeps appending.
   *
   * The store calls `listener.frame` for every frame whose seq is greater than `afterSeq`, in
   * order and once each, whether it was appended before or after the call (closing the race
   * between the replay and the subscription is the store's job), until the final frame, `cancel()`,
   * or `listener.end`. Resolves once the subscription is in place; rejecting answers the resume
   * with 503. Without `subscribe`, a resume on a non-owner replays what is stored and ends with
   * the retry hint, so the client polls.
   */
  subscribe?(stream: StreamKey, afterSeq: number, listener: StreamListener): StreamSubscription | Promise<StreamSubscription>;
  /**
   * Optional, with `subscribe`: the owner let go of a stream's connection (`closeSSEStream`). The
   * store tells every live tail of the stream to end with `retryMs` once it has delivered frame
   * `afterSeq`, so a tool's close reaches its client wherever it is connected.
   */
  closeTails?(stream: StreamKey, afterSeq: number, retryMs: number): void | Promise<void>;
}

/** Receives a stream's frames from {@link EventStore.subscribe}. */
export interface StreamListener {
  /** The next frame of the stream; `final` is the frame that completes it (the subscription ends). */
  frame(frame: string, seq: number, final: boolean): void;
  /**
   * The subscription is over and will deliver nothing more: `deleted` when the session's events
   * were dropped (DELETE, expiry), `error` when the store cannot guarantee gapless delivery (store
   * unreachable, frames evicted before they could be read). The engine ends the connection; the
   * client resumes and gets the store's current answer.
   */
  end(reason: 'deleted' | 'error', error?: Error): void;
  /** The owner closed the stream's connection ({@link EventStore.closeTails}): end it with this retry hint. The subscription is over. */
  closed(retryMs: number): void;
}

export interface StreamSubscription {
  /** Stops delivery (the client went away). Idempotent. */
  cancel(): void;
}

export interface UnfinishedStream {
  streamId: string;
  lastSeq: number;
  requestIds: Array<string | number>;
}

/** Who writes a request stream, and how far it got (see {@link EventStore.writer}). */
export interface StreamWriter {
  instanceId: string;
  requestIds: Array<string | number>;
  /** The seq of its last stored frame. */
  lastSeq: number;
  /** Its final frame is stored: nothing is lost, whoever wrote it. */
  complete: boolean;
}

export interface StreamKey {
  sessionId: string;
  /** The stream token: 128 random bits, base64url. */
  streamId: string;
}

export type ReplayResult =
  | {
      ok: true;
      /** Frames after the cursor, oldest first, exactly as they were written. */
      frames: string[];
      /** Sequence number of the last frame in `frames` (or the cursor when empty). */
      lastSeq: number;
      /** True when the stream's final frame has been stored (it may be in `frames` or before). */
      complete: boolean;
      /**
       * The retry hint of the stream's last {@link EventStore.closeTails}, if the store keeps it: a
       * resume on another instance primes with it, so the pace a tool set sticks there too.
       */
      retryMs?: number;
    }
  | {
      ok: false;
      /**
       * `unknown`: no such stream for this session (never existed, another session's, or expired);
       * `evicted`: the stream exists but frames after the cursor were dropped by retention limits.
       */
      reason: 'unknown' | 'evicted';
      /**
       * With `evicted`: the stream's final frame (its request's answer), when the store still has
       * it although frames between the cursor and it are gone (a Redis that restarted empty while
       * the call ran on). The engine then ends the call for its client with an error, since the
       * events in between can never reach it, instead of a `410` that leaves an SDK client waiting
       * for its request timeout.
       */
      final?: string;
    };
