import type { Redis, RedisOptions } from 'ioredis';
import type { ClusterMessage } from '@mcp-kit/core';
import { LuaScript } from '../client.js';
import type { Keyspace } from '../keyspace.js';

/**
 * How long a bus message is kept for an instance that was away (its subscriber reconnecting, a
 * half-open connection until its ping fails, a frozen or cut-off instance): five minutes.
 */
export const BUS_RETENTION_MS = 5 * 60_000;
/** A session's inbox keeps at most about this many messages (trimmed with `~`), whatever their age. */
export const BUS_MAX_ENTRIES = 1_000;
/** Entries read back per session and round trip. */
const PAGE = 500;
/** Channels subscribed per command. */
const SUBSCRIBE_BATCH = 1_000;

/**
 * A Lua function for the scripts that post on the bus: appends `message` (`{"f":…,"t":…,"m":…}`)
 * to the session's inbox stream (entries older than `retention` ms, or past `maxlen`, are trimmed;
 * the key expires `retention` ms after the last post), then publishes it on the session's channel
 * with its entry id as `i`. The inbox is what the message is; the publish only wakes the instances
 * holding a copy of the session (and saves them a read).
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

// KEYS: the session's inbox. ARGV: its channel, the message, retention, max entries.
const POST = new LuaScript(`${BUS_POST_LUA}return post(KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]))`, 1);

interface Envelope {
  /** The message's id in its session's inbox. */
  i?: string;
  /** The instance that posted it. */
  f?: string;
  /** The instance it is for, `'*'` for every one holding a copy of the session. */
  t?: string;
  m?: ClusterMessage;
}

/** A session this instance holds a copy of: the id of the last message of its inbox taken here. */
interface Followed {
  cursor: string;
  /** Its inbox is being read back: live messages wait for it (read again after). */
  reading: boolean;
  again: boolean;
}

/** `-1`, `0` or `1` as stream id `a` is before, equal to or after `b`. */
function compareIds(a: string, b: string): number {
  const [am = 0, as = 0] = a.split('-').map(Number);
  const [bm = 0, bs = 0] = b.split('-').map(Number);
  return am === bm ? Math.sign(as - bs) : Math.sign(am - bm);
}

/**
 * The bus of a shared cluster: what one instance sends another about a session, backed by durable
 * state. Every message is about one session and goes to that session's inbox, a Redis stream in
 * the session's slot (`<prefix>{<id>}:inbox`), published on its channel (`<prefix>{<id>}:bus`) in
 * the same script, so a post resolves only once the message is stored, and an `ended` is stored in
 * one step with the record it deletes. Each instance follows the sessions it holds a copy of: it
 * subscribes to their channels and keeps a cursor in each inbox. It takes live messages as they
 * come while its subscriber connection is known to have missed nothing; after a gap (the
 * connection dropped, or went half-open and failed a ping, or the process was frozen) it reads
 * back what the inboxes of its sessions hold past their cursors, in order, before it takes live
 * messages again. Each message is taken once, by the instance it is for (or by every holder).
 */
export class SharedBus {
  private readonly followed = new Map<string, Followed>();
  private listener: ((message: ClusterMessage) => void) | undefined;
  private connect: ((options: RedisOptions) => Redis) | undefined;
  private subscriber: Redis | undefined;
  /** The channels the current connection is subscribed to. */
  private readonly subscribed = new Set<string>();
  /** Live messages are taken as they come: nothing was missed since the cursors. */
  private live = false;
  /** A live message came while reading back: read again before going live. */
  private dirty = false;
  private syncing: Promise<void> | undefined;
  /** The connection whose ping is awaited. */
  private pinging: Redis | undefined;
  private closed = false;

  constructor(
    private readonly options: {
      client: Redis;
      keys: Keyspace;
      instanceId: string;
      /** A subscriber that does not answer a ping within this long is given up and made again. */
      pingTimeoutMs: number;
      /** Something may have been missed (the subscriber connection was lost). */
      onGap: () => void;
    },
  ) {}

  /** What {@link BUS_POST_LUA} posts for `message` from this instance to instance `to` (`'*'`: every holder). */
  envelope(to: string, message: ClusterMessage): string {
    return JSON.stringify({ f: this.options.instanceId, t: to, m: message } satisfies Envelope);
  }

  /** Resolves once `message` is in its session's inbox, for `to` (`'*'`: every instance holding a copy); rejects if Redis did not take it. */
  async post(to: string, message: ClusterMessage): Promise<void> {
    const { client, keys } = this.options;
    await POST.run(client, [
      keys.inbox(message.sessionId),
      keys.busChannel(message.sessionId),
      this.envelope(to, message),
      BUS_RETENTION_MS,
      BUS_MAX_ENTRIES,
    ]);
  }

  /**
   * Takes what is posted about `sessionId` from now on, and what its inbox holds past `cursor`
   * (the last entry when the copy was read; `'0-0'` for a session created here).
   */
  follow(sessionId: string, cursor = '0-0'): void {
    if (this.followed.has(sessionId)) return;
    const followed: Followed = { cursor, reading: false, again: false };
    this.followed.set(sessionId, followed);
    const subscriber = this.subscriber;
    if (!subscriber || !this.live) return; // the next read back subscribes it
    const channel = this.options.keys.busChannel(sessionId);
    subscriber.subscribe(channel).then(
      () => {
        if (this.subscriber !== subscriber || this.followed.get(sessionId) !== followed) return;
        this.subscribed.add(channel);
        void this.readOne(sessionId, followed).catch(() => this.gap());
      },
      () => this.gap(),
    );
  }

  /** This instance holds no copy of `sessionId` any more. */
  unfollow(sessionId: string): void {
    if (!this.followed.delete(sessionId)) return;
    const channel = this.options.keys.busChannel(sessionId);
    if (this.subscribed.delete(channel)) this.subscriber?.unsubscribe(channel).catch(() => {});
  }

  /** `listener` gets what is posted to this instance or to every holder of a session it follows; `connect` makes the subscriber connection. */
  listen(listener: (message: ClusterMessage) => void, connect: (options: RedisOptions) => Redis): void {
    this.listener = listener;
    if (this.subscriber || this.closed) return;
    this.connect = connect;
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
   * Reads what the inboxes of the followed sessions hold past their cursors (subscribing first to
   * the channels the connection lacks, when it is up), then takes live messages again if the
   * connection is subscribed to all of them. Rejects when Redis cannot be read. Several calls
   * share one read.
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
    // resubscribe would take live messages before the gap is read back.
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
    this.subscribed.clear();
    this.gap();
  }

  private gap(): void {
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
    const sessionId = this.options.keys.sessionOfBusChannel(channel);
    const followed = sessionId === undefined ? undefined : this.followed.get(sessionId);
    if (!followed) return;
    let envelope: Envelope;
    try {
      envelope = JSON.parse(raw) as Envelope;
    } catch {
      return;
    }
    if (typeof envelope.i !== 'string') return;
    if (!this.live) {
      // Read back from the inbox, in order, with what came before it.
      this.dirty = true;
      this.resync().catch(() => {});
      return;
    }
    // Not subscribed as far as this instance knows yet, or its inbox being read: the read takes it, in order.
    if (followed.reading || !this.subscribed.has(channel)) {
      followed.again = true;
      return;
    }
    if (compareIds(envelope.i, followed.cursor) <= 0) return;
    followed.cursor = envelope.i;
    this.deliver(envelope);
  }

  private async readBack(): Promise<void> {
    try {
      this.live = false;
      do {
        this.dirty = false;
        const subscriber = this.subscriber;
        if (subscriber?.status === 'ready') {
          const missing = [...this.followed.keys()].map((id) => this.options.keys.busChannel(id)).filter((c) => !this.subscribed.has(c));
          try {
            for (let i = 0; i < missing.length; i += SUBSCRIBE_BATCH) {
              const batch = missing.slice(i, i + SUBSCRIBE_BATCH);
              await subscriber.subscribe(...batch);
              if (this.subscriber !== subscriber || subscriber.status !== 'ready') break;
              for (const channel of batch) this.subscribed.add(channel);
            }
          } catch {
            // The connection dropped again: the inboxes are read all the same; its next `ready` subscribes.
          }
        }
        // Subscribed before reading: whatever is posted from now on is heard live, or read here.
        await this.readInboxes([...this.followed]);
      } while (this.dirty);
      const subscriber = this.subscriber;
      this.live =
        subscriber?.status === 'ready' && [...this.followed.keys()].every((id) => this.subscribed.has(this.options.keys.busChannel(id)));
    } finally {
      this.syncing = undefined;
    }
  }

  /** One session's inbox past its cursor (a session followed while live), then whatever came live meanwhile. */
  private async readOne(sessionId: string, followed: Followed): Promise<void> {
    followed.reading = true;
    try {
      do {
        followed.again = false;
        await this.readInboxes([[sessionId, followed]]);
      } while (followed.again && this.followed.get(sessionId) === followed);
    } finally {
      followed.reading = false;
    }
  }

  /** What the inboxes of `sessions` hold past their cursors, in order, a page of each per round trip. */
  private async readInboxes(sessions: Array<[string, Followed]>): Promise<void> {
    let due = sessions;
    while (due.length > 0) {
      const pipeline = this.options.client.pipeline();
      for (const [id, followed] of due) pipeline.xrange(this.options.keys.inbox(id), `(${followed.cursor}`, '+', 'COUNT', PAGE);
      const replies = (await pipeline.exec()) ?? [];
      const more: Array<[string, Followed]> = [];
      for (const [j, [id, followed]] of due.entries()) {
        const [error, entries] = replies[j] ?? [new Error('no reply')];
        if (error) throw error;
        for (const [entryId, fields] of entries as Array<[string, string[]]>) {
          if (compareIds(entryId, followed.cursor) <= 0) continue;
          followed.cursor = entryId;
          try {
            this.deliver(JSON.parse(fields[1] ?? '') as Envelope);
          } catch {
            // not a message: skipped
          }
        }
        if ((entries as unknown[]).length === PAGE && this.followed.get(id) === followed) more.push([id, followed]);
      }
      due = more;
    }
  }

  private deliver(envelope: Envelope): void {
    const { instanceId } = this.options;
    if (envelope.f === instanceId || !envelope.m || (envelope.t !== '*' && envelope.t !== instanceId)) return;
    try {
      this.listener?.(envelope.m);
    } catch {
      // the listener reports its own errors; one message never stops the others
    }
  }
}
