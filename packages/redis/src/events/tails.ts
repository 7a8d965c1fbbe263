import type { Redis } from 'ioredis';
import type { ReplayResult, StreamKey, StreamListener, StreamSubscription } from '@mcp-kit/core';
import { duplicateClient } from '../client.js';

/** Frames a tail may hold while it reads a gap from Redis; past it the tail ends and the client resumes. */
const MAX_PENDING = 10_000;

/** How a tail reads what a stream holds after a seq (the store's `replayAfter`). */
type Replay = (sessionId: string, streamId: string, afterSeq: number) => Promise<ReplayResult>;

/**
 * The live tails of one event store: one subscriber connection for all of them, one subscription
 * per followed stream's channel, and each tail's frames in order and once. After the connection
 * comes back, every channel is subscribed again and every tail reads its gap from the stream; a
 * connection that stays down past `reconnectGraceMs` ends the tails (their clients resume).
 */
export class LiveTails {
  private subscriber: Redis | undefined;
  private subscriberConnecting: Promise<void> | undefined;
  private subscriberWasReady = false;
  private graceTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly channels = new Map<string, { tails: Set<Tail>; ready: Promise<unknown> }>();
  private closed = false;

  constructor(
    private readonly client: Redis,
    private readonly replay: Replay,
    /** The channel a stream's appends are published on. */
    private readonly channelOf: (key: StreamKey) => string,
    private readonly reconnectGraceMs: number,
    private readonly commandTimeoutMs: number,
  ) {}

  /**
   * Follows a stream from any instance: subscribes to its channel, then reads what was appended
   * after `afterSeq` (so nothing falls between the two), then delivers published frames in seq
   * order; a gap (a message lost while the subscriber connection was down) is filled from the
   * stream. One subscriber connection per store serves every tail.
   */
  async subscribe(key: StreamKey, afterSeq: number, listener: StreamListener): Promise<StreamSubscription> {
    const subscriber = await this.subscriberConnection();
    const channel = this.channelOf(key);
    let entry = this.channels.get(channel);
    if (!entry) {
      const created = { tails: new Set<Tail>(), ready: subscriber.subscribe(channel) };
      created.ready.catch(() => {
        if (this.channels.get(channel) === created) this.channels.delete(channel);
      });
      this.channels.set(channel, created);
      entry = created;
    }
    const tail = new Tail(this.replay, key, afterSeq, listener, () => this.drop(channel, tail));
    entry.tails.add(tail);
    try {
      await entry.ready;
    } catch (error) {
      tail.cancel();
      throw error;
    }
    void tail.catchUp();
    return tail;
  }

  /** Live tails on this instance. */
  get count(): number {
    let n = 0;
    for (const entry of this.channels.values()) n += entry.tails.size;
    return n;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.graceTimer) clearTimeout(this.graceTimer);
    for (const entry of this.channels.values()) for (const tail of entry.tails) tail.fail('error');
    this.channels.clear();
    this.subscriber?.disconnect();
  }

  private drop(channel: string, tail: Tail): void {
    const entry = this.channels.get(channel);
    if (!entry || !entry.tails.delete(tail) || entry.tails.size > 0) return;
    this.channels.delete(channel);
    this.subscriber?.unsubscribe(channel).catch(() => {});
  }

  private async subscriberConnection(): Promise<Redis> {
    if (this.closed) throw new Error('RedisEventStore is closed');
    if (!this.subscriber) {
      const subscriber = duplicateClient(this.client, {
        lazyConnect: true,
        // Resubscribing is ours: after the SUBSCRIBE is acknowledged, tails re-read their gap.
        autoResubscribe: false,
        enableOfflineQueue: false,
        maxRetriesPerRequest: 0,
        commandTimeout: this.commandTimeoutMs,
        connectionName: 'mcp-kit-tails',
      });
      subscriber.on('error', () => {});
      subscriber.on('message', (channel: string, message: string) => this.onMessage(channel, message));
      subscriber.on('ready', () => this.onSubscriberReady());
      subscriber.on('close', () => this.onSubscriberLost());
      this.subscriber = subscriber;
      this.subscriberConnecting = subscriber.connect().catch(() => {});
    }
    if (this.subscriber.status !== 'ready') {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([this.subscriberConnecting, new Promise((resolve) => (timer = setTimeout(resolve, this.commandTimeoutMs)))]);
      clearTimeout(timer);
    }
    if (this.subscriber.status !== 'ready') throw new Error('Redis is unreachable: the subscriber connection is down');
    return this.subscriber;
  }

  private onMessage(channel: string, message: string): void {
    const entry = this.channels.get(channel);
    if (!entry) return;
    const space = message.indexOf(' ');
    const flag = message.charAt(space + 1);
    if (flag === 'd') {
      for (const tail of [...entry.tails]) tail.fail('deleted');
      return;
    }
    const seq = Number(message.slice(0, space));
    if (flag === 'c') {
      const retryMs = Number(message.slice(space + 3));
      for (const tail of [...entry.tails]) tail.onClosed(seq, retryMs);
      return;
    }
    const frame = message.slice(space + 3);
    for (const tail of [...entry.tails]) tail.onPublished(frame, seq, flag === '1');
  }

  private onSubscriberLost(): void {
    if (this.closed || this.graceTimer || this.channels.size === 0) return;
    this.graceTimer = setTimeout(() => {
      this.graceTimer = undefined;
      if (this.subscriber?.status === 'ready') return;
      for (const entry of this.channels.values())
        for (const tail of [...entry.tails]) tail.fail('error', new Error('Redis subscriber connection lost'));
    }, this.reconnectGraceMs);
    this.graceTimer.unref?.();
  }

  private onSubscriberReady(): void {
    const again = this.subscriberWasReady;
    this.subscriberWasReady = true;
    if (this.graceTimer) {
      clearTimeout(this.graceTimer);
      this.graceTimer = undefined;
    }
    if (!again || this.channels.size === 0) return;
    const channels = [...this.channels.keys()];
    const tails = [...this.channels.values()].flatMap((entry) => [...entry.tails]);
    (this.subscriber as Redis).subscribe(...channels).then(
      () => {
        for (const tail of tails) void tail.catchUp();
      },
      (error: unknown) => {
        for (const tail of tails) tail.fail('error', error instanceof Error ? error : new Error(String(error)));
      },
    );
  }
}

/** One live tail: delivers frames after a cursor, in order and once each. */
class Tail implements StreamSubscription {
  private next: number;
  private readonly startSeq: number;
  /** The owner closed the stream after this frame: end there, with this retry hint. */
  private closeAt: { afterSeq: number; retryMs: number } | undefined;
  private reading = false;
  private readAgain = false;
  private pending: Array<{ frame: string; seq: number; final: boolean }> = [];
  private done = false;

  constructor(
    private readonly replay: Replay,
    private readonly key: StreamKey,
    afterSeq: number,
    private readonly listener: StreamListener,
    private readonly onDone: () => void,
  ) {
    this.next = afterSeq + 1;
    this.startSeq = afterSeq;
  }

  cancel(): void {
    this.finish();
  }

  fail(reason: 'deleted' | 'error', error?: Error): void {
    if (this.done) return;
    this.finish();
    this.listener.end(reason, error);
  }

  onClosed(afterSeq: number, retryMs: number): void {
    // A close at or before where this tail started is the one its client just resumed from.
    if (this.done || afterSeq <= this.startSeq) return;
    this.closeAt = { afterSeq, retryMs };
    if (!this.reading) {
      if (this.next - 1 >= afterSeq) this.closeNow();
      else void this.catchUp();
    }
  }

  onPublished(frame: string, seq: number, final: boolean): void {
    if (this.done || seq < this.next) return;
    if (this.reading) {
      if (this.pending.length >= MAX_PENDING) return this.fail('error', new Error('live tail fell too far behind'));
      this.pending.push({ frame, seq, final });
      return;
    }
    if (seq === this.next) return this.deliver(frame, seq, final);
    void this.catchUp();
  }

  /** Reads what the stream holds after the last delivered frame, then what was published meanwhile. */
  async catchUp(): Promise<void> {
    if (this.done) return;
    if (this.reading) {
      this.readAgain = true;
      return;
    }
    this.reading = true;
    try {
      do {
        this.readAgain = false;
        const before = this.next;
        const result = await this.replay(this.key.sessionId, this.key.streamId, this.next - 1);
        if (this.done) return;
        if (!result.ok) {
          // Gone (deleted, expired) or frames evicted before this tail could read them.
          return this.fail(result.reason === 'unknown' ? 'deleted' : 'error', new Error(`live tail: stream ${result.reason}`));
        }
        const { frames, complete } = result;
        for (let i = 0; i < frames.length && !this.done; i++)
          this.deliver(frames[i] as string, this.next, complete && i === frames.length - 1);
        if (this.done) return;
        const pending = this.pending.sort((a, b) => a.seq - b.seq);
        this.pending = [];
        for (const p of pending) {
          if (p.seq < this.next) continue;
          if (p.seq > this.next) {
            this.readAgain = true;
            break;
          }
          this.deliver(p.frame, p.seq, p.final);
          if (this.done) return;
        }
        if (this.closeAt && this.next - 1 < this.closeAt.afterSeq) {
          // The frames before a close are stored before it is published; if a read brings none, close anyway.
          if (this.next === before) return this.closeNow();
          this.readAgain = true;
        }
      } while (this.readAgain);
    } catch (error) {
      this.fail('error', error instanceof Error ? error : new Error(String(error)));
    } finally {
      this.reading = false;
    }
  }

  private deliver(frame: string, seq: number, final: boolean): void {
    this.next = seq + 1;
    this.listener.frame(frame, seq, final);
    if (final) this.finish();
    else if (this.closeAt && seq >= this.closeAt.afterSeq) this.closeNow();
  }

  private closeNow(): void {
    const retryMs = (this.closeAt as { retryMs: number }).retryMs;
    this.finish();
    this.listener.closed(retryMs);
  }

  private finish(): void {
    if (this.done) return;
    this.done = true;
    this.pending = [];
    this.onDone();
  }
}
