import type { EventStore, ReplayResult, StreamKey } from '../ports/event-store.js';
import { positiveInt } from '../util/numbers.js';

/** Retention limits of {@link MemoryEventStore}. Every limit applies at once. */
export interface MemoryEventStoreOptions {
  /** Frames kept per stream; older ones are evicted first. Default `10_000`. */
  maxEventsPerStream?: number;
  /**
   * Total size of stored frames across all sessions, in UTF-16 code units (≈ bytes for ASCII
   * JSON). The globally oldest frames go first. Default `64 * 1024 * 1024`.
   */
  maxBytes?: number;
  /** Frames older than this are evicted. Default `15 * 60_000` (15 minutes). */
  maxAgeMs?: number;
  /** Streams whose frames were all evicted are remembered (to say "evicted", not "unknown") up to this count. Default `10_000`. */
  maxTombstones?: number;
  /** Clock, for tests. Default `Date.now`. */
  now?: () => number;
}

class StreamLog {
  frames: string[] = [];
  head = 0;
  /** seq of frames[head]. */
  firstSeq = 1;
  lastSeq = 0;
  complete = false;
  deleted = false;
  /** Neighbours in the list of its session's streams (see MemoryEventStore.bySession). */
  prev: StreamLog | undefined;
  next: StreamLog | undefined;
  constructor(
    readonly sessionId: string,
    readonly streamId: string,
  ) {}

  get size(): number {
    return this.frames.length - this.head;
  }

  dropFirst(): string {
    const frame = this.frames[this.head] as string;
    this.frames[this.head] = '';
    this.head++;
    this.firstSeq++;
    // Compact rarely so that dropping is amortized O(1).
    if (this.head >= 1024 && this.head * 2 >= this.frames.length) {
      this.frames = this.frames.slice(this.head);
      this.head = 0;
    }
    return frame;
  }
}

/**
 * The default event store: bounded, in-process, synchronous. Replay cost depends only on how many
 * frames are replayed (a map lookup and an array slice), not on how much the store holds.
 */
export class MemoryEventStore implements EventStore {
  readonly maxEventsPerStream: number;
  readonly maxBytes: number;
  readonly maxAgeMs: number;
  readonly maxTombstones: number;
  private readonly now: () => number;
  private readonly logs = new Map<string, StreamLog>();
  // Each session's streams as a doubly linked list through the logs (this maps to the newest):
  // forgetting one is O(1) without a scan or a splice (an array made each append O(streams held)),
  // and adding one is two pointer writes where a per-session Set paid a hash insert and rehashes.
  private readonly bySession = new Map<string, StreamLog>();
  private readonly tombstones = new Map<string, string>();
  // Global append order as three parallel arrays (log, seq, time): the front is the oldest frame
  // in the whole store, which makes byte and age eviction O(1) per evicted frame.
  private qLog: StreamLog[] = [];
  private qSeq: number[] = [];
  private qTime: number[] = [];
  private qHead = 0;
  private bytes = 0;
  private events = 0;

  constructor(options: MemoryEventStoreOptions = {}) {
    this.maxEventsPerStream = positiveInt(options.maxEventsPerStream ?? 10_000, 'maxEventsPerStream', 'MemoryEventStore');
    this.maxBytes = positiveInt(options.maxBytes ?? 64 * 1024 * 1024, 'maxBytes', 'MemoryEventStore');
    this.maxAgeMs = positiveInt(options.maxAgeMs ?? 15 * 60_000, 'maxAgeMs', 'MemoryEventStore');
    this.maxTombstones = positiveInt(options.maxTombstones ?? 10_000, 'maxTombstones', 'MemoryEventStore');
    this.now = options.now ?? Date.now;
  }

  /** Frames and approximate bytes held now. */
  stats(): { streams: number; events: number; bytes: number } {
    return { streams: this.logs.size, events: this.events, bytes: this.bytes };
  }

  createStream(key: StreamKey): void {
    if (this.logs.get(key.streamId) !== undefined) return;
    const log = new StreamLog(key.sessionId, key.streamId);
    this.logs.set(key.streamId, log);
    const newest = this.bySession.get(key.sessionId);
    if (newest !== undefined) {
      log.next = newest;
      newest.prev = log;
    }
    this.bySession.set(key.sessionId, log);
  }

  append(key: StreamKey, seq: number, frame: string, final: boolean): void {
    let log = this.logs.get(key.streamId);
    if (!log) {
      this.createStream(key);
      log = this.logs.get(key.streamId) as StreamLog;
    }
    if (log.size === 0) log.firstSeq = seq;
    // Most streams (a tools/call answer) hold one frame: an exact array, not a growable one that
    // starts with room for 17.
    if (log.frames.length === 0) log.frames = [frame];
    else log.frames.push(frame);
    log.lastSeq = seq;
    if (final) log.complete = true;
    const now = this.now();
    this.qLog.push(log);
    this.qSeq.push(seq);
    this.qTime.push(now);
    this.bytes += frame.length;
    this.events++;
    if (log.size > this.maxEventsPerStream) this.evictFirst(log);
    if (this.bytes > this.maxBytes || (this.qTime[this.qHead] as number) <= now - this.maxAgeMs) this.evictGlobal(now);
    // Capped frames and deleted sessions leave stale index entries behind; without this the index
    // grows with the append rate until the age limit, whatever maxEventsPerStream and maxBytes say.
    if (this.qLog.length - this.qHead > 2 * this.events + 1024) this.compactIndex();
  }

  replayAfter(sessionId: string, streamId: string, afterSeq: number): ReplayResult {
    const log = this.logs.get(streamId);
    if (!log || log.sessionId !== sessionId) {
      if (this.tombstones.get(streamId) === sessionId) return { ok: false, reason: 'evicted' };
      return { ok: false, reason: 'unknown' };
    }
    this.evictGlobal(this.now());
    if (afterSeq > log.lastSeq || afterSeq < 0) return { ok: false, reason: 'unknown' };
    // The cursor must be the frame just before the oldest kept one, or newer.
    if (afterSeq < log.firstSeq - 1 && log.size > 0) return { ok: false, reason: 'evicted' };
    if (log.size === 0 && afterSeq < log.lastSeq) return { ok: false, reason: 'evicted' };
    const from = log.head + (afterSeq - log.firstSeq + 1);
    const frames = log.size === 0 ? [] : log.frames.slice(Math.max(from, log.head));
    return { ok: true, frames, lastSeq: log.lastSeq, complete: log.complete };
  }

  deleteSession(sessionId: string): void {
    // Tombstones first: a session whose streams are all tombstones has no bySession entry.
    for (const [streamId, owner] of this.tombstones) if (owner === sessionId) this.tombstones.delete(streamId);
    const newest = this.bySession.get(sessionId);
    if (!newest) return;
    this.bySession.delete(sessionId);
    for (let log: StreamLog | undefined = newest; log !== undefined; log = log.next) {
      log.deleted = true;
      this.logs.delete(log.streamId);
      for (let i = log.head; i < log.frames.length; i++) this.bytes -= (log.frames[i] as string).length;
      this.events -= log.size;
    }
  }

  sweep(now: number = this.now()): void {
    this.evictGlobal(now);
  }

  private evictGlobal(now: number): void {
    const cutoff = now - this.maxAgeMs;
    while (this.qHead < this.qLog.length) {
      const overBytes = this.bytes > this.maxBytes;
      if (!overBytes && (this.qTime[this.qHead] as number) > cutoff) break;
      const log = this.qLog[this.qHead] as StreamLog;
      const seq = this.qSeq[this.qHead] as number;
      this.qLog[this.qHead] = undefined as unknown as StreamLog;
      this.qHead++;
      // Entries whose frame is already gone (per-stream cap, deleted session) are skipped.
      if (log.deleted || seq < log.firstSeq || log.size === 0) continue;
      this.evictFirst(log);
    }
    if (this.qHead >= 4096 && this.qHead * 2 >= this.qLog.length) {
      this.qLog = this.qLog.slice(this.qHead);
      this.qSeq = this.qSeq.slice(this.qHead);
      this.qTime = this.qTime.slice(this.qHead);
      this.qHead = 0;
    }
  }

  /** Keeps only the index entries of frames still held; amortized O(1), as at least half are stale. */
  private compactIndex(): void {
    const qLog: StreamLog[] = [];
    const qSeq: number[] = [];
    const qTime: number[] = [];
    for (let i = this.qHead; i < this.qLog.length; i++) {
      const log = this.qLog[i] as StreamLog;
      const seq = this.qSeq[i] as number;
      if (log.deleted || seq < log.firstSeq || log.size === 0) continue;
      qLog.push(log);
      qSeq.push(seq);
      qTime.push(this.qTime[i] as number);
    }
    this.qLog = qLog;
    this.qSeq = qSeq;
    this.qTime = qTime;
    this.qHead = 0;
  }

  private evictFirst(log: StreamLog): void {
    const frame = log.dropFirst();
    this.bytes -= frame.length;
    this.events--;
    if (log.size === 0 && log.complete) this.forget(log);
  }

  /** A completed stream with nothing left becomes a tombstone, so its cursors say "evicted". */
  private forget(log: StreamLog): void {
    log.deleted = true;
    this.logs.delete(log.streamId);
    const { prev, next } = log;
    if (next !== undefined) next.prev = prev;
    if (prev !== undefined) prev.next = next;
    else if (next !== undefined) this.bySession.set(log.sessionId, next);
    else this.bySession.delete(log.sessionId);
    log.prev = undefined;
    log.next = undefined;
    this.tombstones.set(log.streamId, log.sessionId);
    if (this.tombstones.size > this.maxTombstones) {
      const oldest = this.tombstones.keys().next().value as string;
      this.tombstones.delete(oldest);
    }
  }
}
