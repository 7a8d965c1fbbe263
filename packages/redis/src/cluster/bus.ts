import { randomBytes } from 'node:crypto';
import type { ClusterMessage } from '@mcp-kit/core';
import { LuaScript, type RedisClient } from '../client.js';
import type { Keyspace } from '../keyspace.js';
import { createSubscriber, type ChannelSubscriber } from '../pubsub/subscriber.js';
import { pipelinePerNode, type KeyedCommand } from '../slots.js';

/**
 * How long a bus message is kept for an instance that was away (its subscriber reconnecting, a
 * half-open connection until its ping fails, a frozen or cut-off instance): five minutes.
 */
export const BUS_RETENTION_MS = 5 * 60_000;
/** A session's inbox keeps at most about this many messages (trimmed with `~`), whatever their age. */
export const BUS_MAX_ENTRIES = 1_000;
/** Entries read back per session and round trip. */
const PAGE = 500;

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
  publish(channel, '{"i":"' .. id .. '",' .. string.sub(message, 2))
  return id
end
`;

// KEYS: the session's inbox, its channel (a key too: SPUBLISH on a Redis Cluster names it). ARGV:
// the message, retention, max entries.
const POST = new LuaScript(`${BUS_POST_LUA}return post(KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]))`, 2, {
  publishes: true,
});

interface Envelope {
  /** The message's id in its session's inbox. */
  i?: string;
  /** The instance that posted it. */
  f?: string;
  /** The instance it is for, `'*'` for every one holding a copy of the session. */
  t?: string;
  /** A nonce of the post: the same message stored twice (a post sent again) is taken once. */
  u?: string;
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
  private subscriber: ChannelSubscriber | undefined;
  /** The channels subscribed now (confirmed, and not lost since). */
  private readonly subscribed = new Set<string>();
  /** Live messages are taken as they come: nothing was missed since the cursors. */
  private live = false;
  /** A live message came while reading back: read again before going live. */
  private dirty = false;
  private syncing: Promise<void> | undefined;
  /** The nonces of the messages delivered lately: a post ioredis sent again after its connection closed is stored twice, and taken once. */
  private readonly delivered = new Set<string>();
  private closed = false;

  constructor(
    private readonly options: {
      client: RedisClient;
      keys: Keyspace;
      instanceId: string;
      /** A subscriber connection that does not answer a ping within this long is given up and made again. */
      pingTimeoutMs: number;
      commandTimeoutMs: number;
      /** Something may have been missed (the subscriber connection was lost). */
      onGap: () => void;
    },
  ) {}

  /** What {@link BUS_POST_LUA} posts for `message` from this instance to instance `to` (`'*'`: every holder), with a nonce of its own. */
  envelope(to: string, message: ClusterMessage): string {
    return JSON.stringify({ f: this.options.instanceId, t: to, u: randomBytes(9).toString('base64url'), m: message } satisfies Envelope);
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
    subscriber.subscribe([channel]).then((failed) => {
      if (failed.length > 0) return this.gap();
      if (this.followed.get(sessionId) !== followed) return;
      this.subscribed.add(channel);
      void this.readOne(sessionId, followed).catch(() => this.gap());
    });
  }

  /** This instance holds no copy of `sessionId` any more. */
  unfollow(sessionId: string): void {
    if (!this.followed.delete(sessionId)) return;
    const channel = this.options.keys.busChannel(sessionId);
    if (this.subscribed.delete(channel)) this.subscriber?.unsubscribe([channel]);
  }

  /** `listener` gets what is posted to this instance or to every holder of a session it follows (one more Redis connection, subscribed; on a Redis Cluster one per master). */
  listen(listener: (message: ClusterMessage) => void): void {
    this.listener = listener;
    if (this.subscriber || this.closed) return;
    const { client, commandTimeoutMs } = this.options;
    // Subscribed by `readBack` once it knows where to read from: a resubscription of its own
    // would take live messages before the gap is read back.
    const subscriber = createSubscriber(client, 'mcp-kit-bus', commandTimeoutMs, {
      message: (channel, raw) => this.receive(channel, raw),
      lost: (channels) => {
        for (const channel of channels) this.subscribed.delete(channel);
        this.gap();
      },
      ready: () => {
        this.dirty = true;
        this.resync().catch(() => {}); // the next beat tries again
      },
    });
    this.subscriber = subscriber;
    subscriber.connect(commandTimeoutMs).then(
      () => {
        this.dirty = true;
        return this.resync();
      },
      () => {}, // the next beat tries again
    );
  }

  /** Whether live messages are taken as they come (always, with nobody listening). */
  get synced(): boolean {
    return !this.subscriber || this.live;
  }

  /** Every heartbeat: a gap not read back yet is read back, and the subscriber's connections are pinged. */
  tick(): void {
    if (!this.subscriber || this.closed) return;
    if (!this.live) this.resync().catch(() => {}); // the next beat tries again
    this.subscriber.ping(this.options.pingTimeoutMs);
  }

  /**
   * Reads what the inboxes of the followed sessions hold past their cursors (subscribing first to
   * the channels not subscribed, when the subscriber can), then takes live messages again if every
   * followed session's channel is subscribed. Rejects when Redis cannot be read. Several calls
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
    await subscriber?.close();
  }

  private gap(): void {
    this.live = false;
    this.options.onGap();
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
        if (subscriber?.ready) {
          const missing = [...this.followed.keys()].map((id) => this.options.keys.busChannel(id)).filter((c) => !this.subscribed.has(c));
          // What could not be subscribed (its connection down) is read all the same; its next `ready` subscribes it.
          const failed = new Set(await subscriber.subscribe(missing));
          if (this.subscriber === subscriber) for (const channel of missing) if (!failed.has(channel)) this.subscribed.add(channel);
        }
        // Subscribed before reading: whatever is posted from now on is heard live, or read here.
        await this.readInboxes([...this.followed]);
      } while (this.dirty);
      const subscriber = this.subscriber;
      this.live = !!subscriber?.ready && [...this.followed.keys()].every((id) => this.subscribed.has(this.options.keys.busChannel(id)));
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

  /** What the inboxes of `sessions` hold past their cursors, in order, a page of each per round trip (one per master on a Redis Cluster). */
  private async readInboxes(sessions: Array<[string, Followed]>): Promise<void> {
    let due = sessions;
    while (due.length > 0) {
      const replies = await pipelinePerNode(
        this.options.client,
        due.map(([id, followed]): KeyedCommand => ['xrange', this.options.keys.inbox(id), `(${followed.cursor}`, '+', 'COUNT', PAGE]),
      );
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
    if (envelope.u !== undefined) {
      if (this.delivered.has(envelope.u)) return;
      this.delivered.add(envelope.u);
      if (this.delivered.size > 10_000) this.delivered.delete(this.delivered.values().next().value!);
    }
    try {
      this.listener?.(envelope.m);
    } catch {
      // the listener reports its own errors; one message never stops the others
    }
  }
}
