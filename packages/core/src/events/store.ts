/**
 * The event store port. mcp-kit stores every SSE frame it sends on a resumable stream *before* it
 * writes it, so a client that lost the connection can `GET` with `Last-Event-ID` and get the rest.
 *
 * The engine assigns ids (`<stream token>.<seq>`), so a store only keeps frames in order per stream
 * and answers "what came after seq N". Methods may return a promise (Redis) or a plain value (the
 * memory store's synchronous fast path); the engine awaits only when it gets a promise.
 */
export interface EventStore {
  /** Registers a stream before its priming event goes out, so `<token>.0` is a valid cursor. */
  createStream(stream: StreamKey): void | Promise<void>;
  /**
   * Appends one serialized SSE frame. `seq` starts at 1 and grows by 1 per stream. `final` marks
   * the frame that completes the stream (the last response of a POST), which lets a replay that
   * reaches it end the resumed stream.
   */
  append(stream: StreamKey, seq: number, frame: string, final: boolean): void | Promise<void>;
  /** The frames of `streamId` after `afterSeq`, if the stream belongs to `sessionId`. */
  replayAfter(sessionId: string, streamId: string, afterSeq: number): ReplayResult | Promise<ReplayResult>;
  /** Drops everything a session stored (DELETE, expiry). */
  deleteSession(sessionId: string): void | Promise<void>;
  /** Optional: evicts by age now. The handler calls it periodically. */
  sweep?(now: number): void;
  /** Optional: releases timers and connections. */
  close?(): void | Promise<void>;
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
    }
  | {
      ok: false;
      /**
       * `unknown`: no such stream for this session (never existed, another session's, or expired);
       * `evicted`: the stream exists but frames after the cursor were dropped by retention limits.
       */
      reason: 'unknown' | 'evicted';
    };
