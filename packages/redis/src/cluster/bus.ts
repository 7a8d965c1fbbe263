import type { Redis, RedisOptions } from 'ioredis';
import type { ClusterMessage } from '@mcp-kit/core';
import { LuaScript } from '../client.js';

/**
 * How long a bus message is kept for an instance that was away (its subscriber reconnecting, a
 * half-open connection until its ping fails, a frozen or cut-off instance): five minutes.
 */
export const BUS_RETENTION_MS = 5 * 60_000;
/** An inbox keeps at most about this many messages (trimmed with `~`), whatever their age. */
export const BUS_MAX_ENTRIES = 10_000;
/** Entries read back per round trip. */
const PAGE = 500;

/**
 * A Lua function for the scripts that post on the bus: appends `message` (`{"f":…,"m":…}`) to the
 * stream `inbox` (entries older than `retention` ms, or past `maxlen`, are trimmed; the key expires
 * `retention` ms after the last post), then publishes it on `channel` with its entry id as `i`.
 * The inbox is what the message is; the publish only wakes the instance (and saves it a read).
 */
export const BUS_POST_LUA = `local function post(inbox, channel, message, retention, maxlen)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local id = redis.call('XADD', inbox, 'MINID', '~', string.format('%d', now - retention), '*', 'm', message)
  if redis.call('XLEN', inbox) > maxlen then redis.call('XTRIM', inbox, 'MAXLEN', '~', maxlen) end
  redis.call('PEXPIRE', inbox, retention)
  redis.call('PUBLISH', channel, '{"i":"' .. id .. '",' .. string.sub(message, 2))
  return id
end
`;

// KEYS: the inbox. ARGV: its channel, the message, retention, max entries.
const POST = new LuaScript(`${BUS_POST_LUA}return post(KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]))`, 1);

interface Envelope {
  /** The message's id in its inbox; missing from an instance of a version that only published. */
  i?: string;
  /** The instance that posted it. */
  f?: string;
  m?: ClusterMessage;
}

/** An inbox this instance reads, and the id of the last of its messages it took. */
interface Inbox {
  key: string;
  channel: string;
  cursor: string | undefined;
}

/** `-1`, `0` or `1` as stream id `a` is before, equal to or after `b`. */
function compareIds(a: string, b: string): number {
  const [am = 0, as = 0] = a.split('-').map(Number);
  const [bm = 0, bs = 0] = b.split('-').map(Number);
  return am === bm ? Math.sign(as - bs) : Math.sign(am - bm);
}

/**
 * The bus of a shared cluster: what one instance sends another (or all) about a session, backed by
 * durable state (issue 27, item 5). Each message is appended to the target's inbox, a Redis stream
 * (`<prefix>inbox:<instance id>`, or `<prefix>inbox:*` for all), and published on its channel in the
 * same script, so a post resolves only once the message is stored, whether or not the target listens
 * now. The target takes live messages as they come while its subscriber connection is known to have
 * missed nothing since its cursor; after a gap (the connection dropped, or went half-open and failed
 * a ping, or the process was frozen) it reads back what its inboxes hold past its cursors, in order,
 * before it takes live messages again. Each message is taken once.
 */
export class SharedBus {
  private readonly inboxes: [mine: Inbox, all: Inbox];
  private listener: ((message: ClusterMessage) => void) | undefined;
  private connect: ((options: RedisOptions) => Redis) | undefined;
  private subscriber: Redis | undefined;
  /** The current connection is subscribed to both channels. */
  private subscribed = false;
  /** Live messages are taken as they come: nothing was missed since the cursors. */
  private live = false;
  /** A live message came while reading back: read again before going live. */
  private dirty = false;
  private syncing: Promise<void> | undefined;
  /** The connection whose ping is awaited. */
  private pinging: Redis | undefined;
  /** When {@link listen} was first called (`performance.now()`): everyone's inbox is read from then on. */
  private listenedAt = 0;
  private closed = false;

  constructor(
    private readonly options: {
      client: Redis;
      prefix: string;
      instanceId: string;
      /** A subscriber that does not answer a ping within this long is given up and made again. */
      pingTimeoutMs: number;
      /** Something may have been missed (the subscriber connection was lost). */
      onGap: () => void;
    },
  ) {
    const inbox = (to: string): Inbox => ({ key: this.inboxKey(to), channel: this.channel(to), cursor: undefined });
    this.inboxes = [inbox(options.instanceId), inbox('*')];
    // Everything in this instance's own inbox is for it; everyone's from when it started to listen (see `listenedSince`).
    this.inboxes[0].cursor = '0-0';
  }

  channel(to: string): string {
    return `${this.options.prefix}bus:${to}`;
  }

  inboxKey(to: string): string {
    return `${this.options.prefix}inbox:${to}`;
  }

  /** What {@link BUS_POST_LUA} posts for `message` from this instance. */
  envelope(message: ClusterMessage): string {
    return JSON.stringify({ f: this.options.instanceId, m: message } satisfies Envelope);
  }

  /** Resolves once `message` is in the inbox of `to` (`'*'`: every instance's); rejects if Redis did not take it. */
  async post(to: string, message: ClusterMessage): Promise<void> {
    await POST.run(this.options.client, [this.inboxKey(to), this.channel(to), this.envelope(message), BUS_RETENTION_MS, BUS_MAX_ENTRIES]);
  }

  /** `listener` gets what is posted to this instance or to all; `connect` makes the subscriber connection. */
  listen(listener: (message: ClusterMessage) => void, connect: (options: RedisOptions) => Redis): void {
    this.listener = listener;
    if (this.subscriber || this.closed) return;
    this.connect = connect;
    this.listenedAt = performance.now();
    this.open();
  }

  /** Whether live messages are taken as they come (always, with nobody listening). */
  get synced(): boolean {
    return !this.subscriber || this.live;
  }

  /** Every heartbeat: a gap not read back yet is read back, and the subscriber is pinged. */
  tick(): void {
    if (!this.subscriber || this.closed) return;
    if (!this.live) this.resync().catch(() => {}); // the next beat tries again
    this.ping(this.subscriber);
  }

  /**
   * Reads what the inboxes hold past their cursors (subscribing first, when the connection is up
   * but not subscribed), then takes live messages again if the connection is subscribed. Rejects
   * when Redis cannot be read. Several calls share one read.
   */
  resync(): Promise<void> {
    if (!this.subscriber) return Promise.resolve();
    this.syncing ??= this.readBack();
    return this.syncing;
  }

  async close(): Promise<void> {
    this.closed = true;
    const subscriber = this.subscriber;
    this.subscriber = undefined;
    if (subscriber) await subscriber.quit().catch(() => subscriber.disconnect());
  }

  private open(): void {
    // Subscribed by `readBack` at each connection, once it knows where to read from: ioredis' own
    // resubscribe would take live messages before the gap is read back (and its failure went unhandled).
    const subscriber = this.connect!({ connectionName: 'mcp-kit-bus', enableOfflineQueue: true, autoResubscribe: false });
    this.subscriber = subscriber;
    subscriber.on('error', () => {}); // reconnects by itself
    subscriber.on('close', () => this.lost(subscriber));
    subscriber.on('ready', () => {
      if (this.subscriber !== subscriber) return;
      this.dirty = true;
      this.resync().catch(() => {}); // the next beat tries again
    });
    subscriber.on('message', (channel: string, raw: string) => {
      if (this.subscriber === subscriber) this.receive(channel, raw);
    });
  }

  private lost(subscriber: Redis): void {
    if (this.subscriber !== subscriber) return;
    this.subscribed = false;
    this.live = false;
    this.options.onGap();
  }

  /**
   * A connection can go half-open (a NAT or a firewall forgot it; an instance frozen past Redis'
   * patience): nothing closes, and what is published on it is lost. One that does not answer a
   * ping in time is given up; a new one subscribes and reads back what the inboxes kept.
   */
  private ping(subscriber: Redis): void {
    if (this.pinging === subscriber || subscriber.status !== 'ready') return;
    this.pinging = subscriber;
    const timer = setTimeout(() => this.replace(subscriber), this.options.pingTimeoutMs);
    timer.unref?.();
    subscriber
      .ping()
      .catch(() => {}) // a dropped connection: `close` says so
      .finally(() => {
        clearTimeout(timer);
        if (this.pinging === subscriber) this.pinging = undefined;
      });
  }

  private replace(subscriber: Redis): void {
    if (this.subscriber !== subscriber || this.closed) return;
    this.lost(subscriber);
    subscriber.disconnect(); // ioredis destroys the socket if it does not close in time
    this.open();
  }

  private receive(channel: string, raw: string): void {
    let envelope: Envelope;
    try {
      envelope = JSON.parse(raw) as Envelope;
    } catch {
      return;
    }
    // From an instance that only publishes (an older version, during a rolling upgrade): as it comes.
    if (typeof envelope.i !== 'string') return this.deliver(envelope);
    const inbox = this.inboxes.find((b) => b.channel === channel);
    if (!inbox) return;
    if (!this.live) {
      // Read back from the inbox, in order, with what came before it.
      this.dirty = true;
      this.resync().catch(() => {});
      return;
    }
    if (inbox.cursor !== undefined && compareIds(envelope.i, inbox.cursor) <= 0) return;
    inbox.cursor = envelope.i;
    this.deliver(envelope);
  }

  private async readBack(): Promise<void> {
    try {
      this.live = false;
      const [mine, all] = this.inboxes;
      if (all.cursor === undefined) all.cursor = await this.listenedSince();
      do {
        this.dirty = false;
        const subscriber = this.subscriber;
        if (!this.subscribed && subscriber?.status === 'ready') {
          try {
            await subscriber.subscribe(mine.channel, all.channel);
            if (this.subscriber === subscriber && subscriber.status === 'ready') this.subscribed = true;
          } catch {
            // The connection dropped again: the inboxes are read all the same; its next `ready` subscribes.
          }
        }
        // Subscribed before reading: whatever is posted from now on is heard live, or read here.
        for (const inbox of this.inboxes) await this.read(inbox);
      } while (this.dirty);
      this.live = this.subscribed;
    } finally {
      this.syncing = undefined;
    }
  }

  private async read(inbox: Inbox): Promise<void> {
    for (;;) {
      const entries = (await this.options.client.xrange(inbox.key, `(${inbox.cursor}`, '+', 'COUNT', PAGE)) as Array<[string, string[]]>;
      for (const [id, fields] of entries) {
        inbox.cursor = id;
        try {
          this.deliver(JSON.parse(fields[1] ?? '') as Envelope);
        } catch {
          // not a message: skipped
        }
      }
      if (entries.length < PAGE) return;
    }
  }

  /**
   * Where everyone's inbox is read from: the moment {@link listen} was called, on Redis' clock (the
   * inbox' ids are its times). What was posted to all before this instance listened is not for it
   * (it held no copy then); what was posted since, while it was not subscribed yet, is (it may
   * serve a request before its subscriber connects). Redis' time now, less the time elapsed here
   * since then (the round trip included), is never later than that moment.
   */
  private async listenedSince(): Promise<string> {
    const [seconds, micros] = await this.options.client.time();
    const redisNow = Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000);
    return `${Math.max(0, Math.floor(redisNow - (performance.now() - this.listenedAt)) - 1)}-0`;
  }

  private deliver(envelope: Envelope): void {
    if (envelope.f === this.options.instanceId || !envelope.m) return;
    try {
      this.listener?.(envelope.m);
    } catch {
      // the listener reports its own errors; one message never stops the others
    }
  }
}
