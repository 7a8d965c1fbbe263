import type { ReplayResult, StreamKey, StreamListener, StreamSubscription } from '@mcp-kit/core';
import type { RedisClient } from '../client.js';
import { createSubscriber, type ChannelSubscriber } from '../pubsub/subscriber.js';

/** Frames a tail may hold while it reads a gap from Redis; past it the tail ends and the client resumes. */
const MAX_PENDING = 10_000;

/** How a tail reads what a stream holds after a seq (the store's `replayAfter`). */
type Replay = (sessionId: string, streamId: string, afterSeq: number) => Promise<ReplayResult>;

/**
 * The live tails of one event store: one subscriber for all of them (a connection; on a Redis
 * Cluster one per master, see pubsub/), one subscription per followed stream's channel, and each
 * tail's frames in order and once. A channel lost (its connection dropped; on a Redis Cluster, its
 * slot's master failed over or the slot moved) is subscribed again as soon as the subscriber can,
 * and its tails read their gap from the stream; a channel still lost `reconnectGraceMs` after it
 * was lost ends its tails (their clients resume).
 */
export class LiveTails {
  private readonly subscriber: ChannelSubscriber;
  private graceTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly channels = new Map<string, { tails: Set<Tail>; ready: Promise<unknown> }>();
  /** Channels with tails whose subscription was lost, and since when (one object per loss). */
  private readonly lost = new Map<string, { since: number }>();
  private resubscribing = false;
  private closed = false;

  constructor(
    client: RedisClient,
    private readonly replay: Replay,
    /** The channel a stream's appends are published on. */
    private readonly channelOf: (key: StreamKey) => string,
    private readonly reconnectGraceMs: number,
    private readonly commandTimeoutMs: number,
  ) {
    this.subscriber = createSubscriber(client, 'mcp-kit-tails', commandTimeoutMs, {
      message: (channel, message) => this.onMessage(channel, message),
      lost: (channels) => this.onLost(channels),
      ready: () => void this.resubscribe(),
    });
  }

  /**
   * Follows a stream from any instance: subscribes to its channel, then reads what was appended
   * after `afterSeq` (so nothing falls between the two), then delivers published frames in seq
   * order; a gap (a message lost while the subscriber connection was down) is filled from the
   * stream. One subscriber connection per store serves every tail.
   */
  async subscribe(key: StreamKey, afterSeq: number, listener: StreamListener): Promise<StreamSubscription> {
    if (this.closed) throw new Error('RedisEventStore is closed');
    await this.subscriber.connect(this.commandTimeoutMs);
    const channel = this.channelOf(key);
    let entry = this.channels.get(channel);
    if (!entry) {
      const subscribed = this.subscriber.subscribe([channel]).then((failed) => {
        if (failed.length > 0) throw new Error("Redis is unreachable: the stream's channel could not be subscribed");
      });
      const created = { tails: new Set<Tail>(), ready: subscribed };
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
    if (this.retryTimer) clearTimeout(this.retryTimer);
    for (const entry of this.channels.values()) for (const tail of entry.tails) tail.fail('error');
    this.channels.clear();
    this.lost.clear();
    void this.subscriber.close();
  }

  private drop(channel: string, tail: Tail): void {
    const entry = this.channels.get(channel);
    if (!entry || !entry.tails.delete(tail) || entry.tails.size > 0) return;
    this.channels.delete(channel);
    this.lost.delete(channel);
    this.subscriber.unsubscribe([channel]);
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

  private onLost(channels: string[]): void {
    for (const channel of channels) if (this.channels.has(channel)) this.lost.set(channel, { since: Date.now() });
    this.armGrace();
  }

  /** Ends the tails of channels still lost `reconnectGraceMs` after they were. */
  private armGrace(): void {
    if (this.closed || this.graceTimer || this.lost.size === 0) return;
    const oldest = Math.min(...[...this.lost.values()].map((l) => l.since));
    this.graceTimer = setTimeout(
      () => {
        this.graceTimer = undefined;
        const due = Date.now() - this.reconnectGraceMs;
        for (const [channel, { since }] of [...this.lost]) {
          if (since > due) continue;
          this.lost.delete(channel);
          for (const tail of [...(this.channels.get(channel)?.tails ?? [])])
            tail.fail('error', new Error('Redis subscriber connection lost'));
        }
        this.armGrace();
      },
      Math.max(0, oldest + this.reconnectGraceMs - Date.now()),
    );
    this.graceTimer.unref?.();
  }

  /**
   * Subscribes again what was lost; each tail of a channel subscribed again reads its gap from the
   * stream. What cannot be subscribed yet (its master unreachable) stays lost: the subscriber says
   * `ready` again.
   */
  private async resubscribe(): Promise<void> {
    if (this.closed || this.resubscribing || this.lost.size === 0) return;
    this.resubscribing = true;
    try {
      const losses = [...this.lost];
      const failed = new Set(await this.subscriber.subscribe(losses.map(([channel]) => channel)));
      for (const [channel, loss] of losses) {
        // Lost again while it was subscribed: still lost.
        if (failed.has(channel) || this.lost.get(channel) !== loss) continue;
        this.lost.delete(channel);
        for (const tail of [...(this.channels.get(channel)?.tails ?? [])]) void tail.catchUp();
      }
    } finally {
      this.resubscribing = false;
    }
    // Lost while this ran: the subscriber may have said `ready` meanwhile.
    if (this.subscriber.ready && [...this.lost.keys()].length > 0) void this.retryLater();
  }

  private retryTimer: ReturnType<typeof setTimeout> | undefined;

  private retryLater(): void {
    if (this.retryTimer || this.closed) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.resubscribe();
    }, 100);
    this.retryTimer.unref?.();
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
