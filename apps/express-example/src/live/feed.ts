import type { Request, Response } from 'express';
import type { EngineEvent, McpHandler } from '@mcp-kit/core';

export interface LiveFeedOptions {
  /** Items kept for browsers that open the page later or reconnect. Default `3000`. */
  history?: number;
  /** Browsers at once; more get 503. Default `16`. */
  maxClients?: number;
  /** How often collected items go out, in ms: at most one SSE message per browser per flush. Default `100`. */
  flushMs?: number;
  /** A browser that leaves this many bytes unread is disconnected (it reconnects and gets the history). Default `1 MiB`. */
  maxBufferedBytes?: number;
}

/** Stored frames, summed per stream per flush: a burst of thousands is one item. */
interface EventsItem {
  type: 'events';
  at: number;
  session: string;
  stream: string;
  count: number;
  bytes: number;
  lastSeq: number;
}

/** Store calls, summed per store and operation per flush. */
interface StoreItem {
  type: 'store';
  at: number;
  store: string;
  op: string;
  count: number;
  maxMs: number;
  failed: number;
}

type FeedItem = Exclude<EngineEvent, { type: 'event' } | { type: 'store' }> | EventsItem | StoreItem;

const KEEP_ALIVE_MS = 15_000;

/**
 * The engine's events (`mcp.observe`) for the live page, as an SSE feed. Bounded whatever runs:
 * history is a ring of `history` items, stored frames and store calls are summed per flush, a
 * browser gets at most one message per flush and is cut when it stops reading, and browsers are
 * capped. Ids are the engine's salted hashes: the page can follow a session, never join it.
 */
export class LiveFeed {
  private readonly ring: Array<{ id: number; item: FeedItem }> = [];
  private readonly clients = new Set<Response>();
  private pending: FeedItem[] = [];
  private readonly frames = new Map<string, EventsItem>();
  private readonly stores = new Map<string, StoreItem>();
  private lastId = 0;
  private idleFlushes = 0;
  private readonly timer: ReturnType<typeof setInterval>;
  private readonly unsubscribe: () => void;
  private readonly history: number;
  private readonly maxClients: number;
  private readonly maxBufferedBytes: number;
  private readonly flushMs: number;

  constructor(handler: McpHandler, options: LiveFeedOptions = {}) {
    this.history = options.history ?? 3000;
    this.maxClients = options.maxClients ?? 16;
    this.maxBufferedBytes = options.maxBufferedBytes ?? 1024 * 1024;
    this.flushMs = options.flushMs ?? 100;
    this.unsubscribe = handler.observe((event) => this.collect(event));
    this.timer = setInterval(() => this.flush(), this.flushMs);
    this.timer.unref();
  }

  /** GET /mcp-kit/live/events: the history after `Last-Event-ID` (all of it if that is gone), then live. */
  serve(req: Request, res: Response): void {
    if (this.clients.size >= this.maxClients) {
      res.status(503).set('retry-after', '5').send('too many live pages open\n');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache, no-transform', 'x-accel-buffering': 'no' });
    res.write(`retry: 1000\n\n`);
    const after = Number(req.get('last-event-id'));
    const oldest = this.ring[0]?.id ?? this.lastId + 1;
    const resumable = Number.isInteger(after) && after >= oldest - 1 && after <= this.lastId;
    const items = this.ring.filter((r) => !resumable || r.id > after).map((r) => r.item);
    this.send(res, items, !resumable);
    this.clients.add(res);
    res.on('close', () => this.clients.delete(res));
  }

  /** Items held for browsers that connect later (at most `history`). */
  get held(): number {
    return this.ring.length;
  }

  /** Browsers connected now. */
  get browsers(): number {
    return this.clients.size;
  }

  close(): void {
    clearInterval(this.timer);
    this.unsubscribe();
    for (const res of this.clients) res.end();
    this.clients.clear();
  }

  private collect(event: EngineEvent): void {
    if (event.type === 'event') {
      const key = `${event.session} ${event.stream}`;
      const sum = this.frames.get(key);
      if (sum) {
        sum.count++;
        sum.bytes += event.bytes;
        sum.lastSeq = event.seq;
        sum.at = event.at;
      } else {
        this.frames.set(key, {
          type: 'events',
          at: event.at,
          session: event.session,
          stream: event.stream,
          count: 1,
          bytes: event.bytes,
          lastSeq: event.seq,
        });
      }
    } else if (event.type === 'store') {
      const key = `${event.store} ${event.op}`;
      const sum = this.stores.get(key) ?? { type: 'store', at: event.at, store: event.store, op: event.op, count: 0, maxMs: 0, failed: 0 };
      sum.count++;
      sum.maxMs = Math.max(sum.maxMs, event.ms);
      if (!event.ok) sum.failed++;
      this.stores.set(key, sum);
    } else {
      // Frames stored before this event go out before it: a close or a resume lands after them.
      this.flushSums();
      this.pending.push(event);
    }
  }

  private flushSums(): void {
    for (const sum of this.frames.values()) this.pending.push(sum);
    this.frames.clear();
    for (const sum of this.stores.values()) this.pending.push(sum);
    this.stores.clear();
  }

  private flush(): void {
    this.flushSums();
    const items = this.pending;
    if (items.length === 0) {
      // A comment now and then keeps proxies from closing an idle page.
      if (++this.idleFlushes * this.flushMs >= KEEP_ALIVE_MS) {
        this.idleFlushes = 0;
        for (const res of this.clients) res.write(': keep-alive\n\n');
      }
      return;
    }
    this.pending = [];
    for (const item of items) this.ring.push({ id: ++this.lastId, item });
    if (this.ring.length > this.history) this.ring.splice(0, this.ring.length - this.history);
    for (const res of this.clients) this.send(res, items, false);
  }

  private send(res: Response, items: FeedItem[], reset: boolean): void {
    res.write(`id: ${this.lastId}\ndata: ${JSON.stringify({ now: Date.now(), reset, items })}\n\n`);
    // A browser that stopped reading must not grow our memory: it reconnects and gets the history.
    if (res.writableLength > this.maxBufferedBytes) res.destroy();
  }
}
