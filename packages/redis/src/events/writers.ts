import type { Redis } from 'ioredis';
import { StreamGap } from '@mcp-kit/core';

/** A frame handed to the store and not stored yet. */
interface Pending {
  seq: number;
  frame: string;
  final: boolean;
  resolve(): void;
  reject(error: unknown): void;
}

/** How many frames, and bytes of them, one append script takes at most. */
const BATCH_FRAMES = 100;
const BATCH_BYTES = 512 * 1024;

/** One stream this instance writes (created here, final frame not stored yet). */
export class WrittenStream {
  /** Its key is in Redis: its first frame is stored. */
  created = false;
  /** Frames up to this one are stored. */
  storedSeq = 0;
  /** Frames up to this one are stored or on their way, in order. */
  acceptedSeq = 0;
  /** The connection (its count of `ready`s) its last frames were stored on: on another, the next batch checks for a gap first. */
  storedOn = -1;
  /** A close stored its retry key: it is kept alive with the stream. */
  closed = false;
  readonly queue: Pending[] = [];
  sending = false;

  constructor(
    readonly sessionId: string,
    readonly streamId: string,
    readonly key: string,
    readonly retryKey: string,
    /** Its registration's field in the session hash (`c:<writer>.<n>`). */
    readonly field: string,
    readonly slot: number,
  ) {}
}

/** What the store runs to write a batch: how many frames went in; a refusal says how many before it (`stored`). */
export type WriteBatch = (stream: WrittenStream, frames: Array<{ seq: number; frame: string; final: boolean }>) => Promise<void>;

/**
 * The streams this instance writes, one batch of frames at a time per stream: a frame goes to
 * Redis only behind its predecessor (stored, or on its way in an earlier batch on the same
 * connection), so Redis never holds a frame past a missing one, and the append script needs no
 * read to check it. Frames that arrive while a batch is on its way go together in the next one.
 * A batch that fails takes the frames queued behind it with it (they would land past a missing
 * frame); the writer tries them again in order.
 *
 * Each stream also takes a field of its session's hash for its registration, the lowest free
 * one of this writer's (`c:<tag>.<n>`); a later stream reuses the field of one that ended, so a
 * session holds as many fields as it had streams at once, not one per stream it ever had.
 *
 * Their keys live `streamTtlMs` and a third past their last refresh: this refreshes them every
 * third of it, in one pipeline, for as long as this instance writes to them, so a stream is kept
 * at least `streamTtlMs` past its final frame without a TTL written per event. An instance that
 * dies stops refreshing, so its keys still age out. A stream leaves with its final frame, or when
 * the engine is done writing it (`EventStore.doneWriting`).
 */
export class StreamWriters {
  private readonly sessions = new Map<string, { hash: string; slots: Array<WrittenStream | undefined> }>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private refreshing = false;
  /** How many times the connection was (re)established: Redis may have lost acknowledged frames across a new one. */
  private connection = 0;

  constructor(
    private readonly client: Redis,
    /** The TTL a stream key is given: `streamTtlMs` and the refresh period. */
    readonly keyTtlMs: number,
    private readonly refreshMs: number,
    /** This writer's part of its fields' names. */
    private readonly tag: string,
    private readonly write: WriteBatch,
  ) {
    client.on('ready', this.onReady);
  }

  private readonly onReady = (): void => void this.connection++;

  /** The stream's state, taking a registration field for it if it is new here. */
  open(sessionId: string, streamId: string, keys: { hash: string; stream: string; retry: string }): WrittenStream {
    let session = this.sessions.get(sessionId);
    if (!session) this.sessions.set(sessionId, (session = { hash: keys.hash, slots: [] }));
    const existing = session.slots.find((s) => s?.streamId === streamId);
    if (existing) return existing;
    let slot = session.slots.indexOf(undefined);
    if (slot < 0) slot = session.slots.length;
    const stream = new WrittenStream(sessionId, streamId, keys.stream, keys.retry, `c:${this.tag}.${slot}`, slot);
    session.slots[slot] = stream;
    this.timer ??= setInterval(() => void this.refresh(), this.refreshMs);
    this.timer.unref?.();
    return stream;
  }

  get(sessionId: string, streamId: string): WrittenStream | undefined {
    return this.sessions.get(sessionId)?.slots.find((s) => s?.streamId === streamId);
  }

  /**
   * Stores `frame` behind the stream's earlier frames. A frame whose predecessor is neither stored
   * nor on its way is refused at once with a {@link StreamGap} (its writer tries it again once the
   * frames before it are in); one stored already resolves.
   */
  append(stream: WrittenStream, seq: number, frame: string, final: boolean): Promise<void> {
    if (seq <= stream.storedSeq) return Promise.resolve();
    if (seq !== stream.acceptedSeq + 1)
      return Promise.reject(new StreamGap(`frame ${stream.acceptedSeq + 1} of this stream is not stored yet`, stream.acceptedSeq + 1));
    stream.acceptedSeq = seq;
    return new Promise((resolve, reject) => {
      stream.queue.push({ seq, frame, final, resolve, reject });
      void this.flush(stream);
    });
  }

  /** Whether the next batch of `stream` goes on another connection than its last frames did. */
  newConnection(stream: WrittenStream): boolean {
    return stream.created && stream.storedOn !== this.connection;
  }

  private async flush(stream: WrittenStream): Promise<void> {
    if (stream.sending) return;
    stream.sending = true;
    try {
      while (stream.queue.length > 0) {
        const batch: Pending[] = [];
        let bytes = 0;
        while (stream.queue.length > 0 && batch.length < BATCH_FRAMES && (batch.length === 0 || bytes < BATCH_BYTES)) {
          const next = stream.queue.shift()!;
          bytes += next.frame.length;
          batch.push(next);
        }
        const on = this.connection;
        try {
          await this.write(stream, batch);
          stream.created = true;
          stream.storedOn = on;
          stream.storedSeq = batch[batch.length - 1]!.seq;
          for (const p of batch) p.resolve();
        } catch (error) {
          const stored = Math.min((error as { stored?: number }).stored ?? 0, batch.length);
          if (stored > 0) {
            stream.created = true;
            stream.storedSeq = batch[stored - 1]!.seq;
          }
          // What was not stored, and everything queued behind it, is tried again by its writer, in order.
          stream.acceptedSeq = stream.storedSeq;
          for (const p of batch.slice(0, stored)) p.resolve();
          for (const p of [...batch.slice(stored), ...stream.queue.splice(0)]) p.reject(error);
        }
      }
    } finally {
      stream.sending = false;
    }
  }

  /** This instance writes no more to the stream: its key ages out, its field is free for the next stream of its session. */
  remove(sessionId: string, streamId: string): void {
    const session = this.sessions.get(sessionId);
    const stream = session?.slots.find((s) => s?.streamId === streamId);
    if (!session || !stream) return;
    session.slots[stream.slot] = undefined;
    if (session.slots.every((s) => s === undefined)) this.removeSession(sessionId);
  }

  removeSession(sessionId: string): void {
    this.sessions.delete(sessionId);
    if (this.sessions.size > 0 || !this.timer) return;
    clearInterval(this.timer);
    this.timer = undefined;
  }

  get size(): number {
    let n = 0;
    for (const s of this.sessions.values()) for (const stream of s.slots) if (stream) n++;
    return n;
  }

  close(): void {
    this.client.off('ready', this.onReady);
    this.sessions.clear();
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One pipeline for every live stream; a failure waits for the next round (a third of the TTL later). */
  private async refresh(): Promise<void> {
    if (this.refreshing || this.client.status !== 'ready') return;
    this.refreshing = true;
    try {
      const pipeline = this.client.pipeline();
      for (const { hash, slots } of this.sessions.values()) {
        // The session's registrations live as long as its streams; `GT` never shortens the session's own TTL.
        pipeline.pexpire(hash, this.keyTtlMs, 'GT');
        for (const stream of slots) {
          if (!stream?.created) continue;
          pipeline.pexpire(stream.key, this.keyTtlMs);
          if (stream.closed) pipeline.pexpire(stream.retryKey, this.keyTtlMs);
        }
      }
      await pipeline.exec();
    } catch {
      // Redis is down: the keys' own TTL still holds for a while; the next round tries again.
    } finally {
      this.refreshing = false;
    }
  }
}
