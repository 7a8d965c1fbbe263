import { Redis, type Cluster } from 'ioredis';
import { dropSilentConnections } from '../client-repairs.js';
import { masterKeyOf } from '../redis-cluster.js';
import { keySlot } from '../slots.js';
import type { ChannelSubscriber, SubscriberEvents } from './events.js';

/** The owner subscribes again at most this often while a master cannot be reached (a failover takes seconds). */
const READY_EVERY_MS = 250;

/** A connection to one master, and the channels subscribed on it. */
interface NodeConnection {
  key: string;
  redis: Redis;
  channels: Set<string>;
  ready: Promise<void>;
  pinging: boolean;
}

/**
 * Sharded pub/sub on a Redis Cluster: one connection per master that serves a subscribed channel's
 * slot, `SSUBSCRIBE` there (one command per slot: Redis refuses channels of several slots in one),
 * and the messages the scripts publish with `SPUBLISH` on the channel's master only.
 *
 * Written here rather than ioredis' `shardedSubscribers`, which resubscribes on its own and tells
 * nobody what it missed meanwhile (errors go to its debug log): an owner must know each channel it
 * lost, to read from durable state what was published while it was not subscribed. A channel is
 * lost when its connection closes (the master died, or went silent: a ping or a command got no
 * answer in time), or when the slots, read again (every second, and after any redirection), name
 * another master for it (a failover, a resharding; the old master drops the subscription of a
 * slot it gives away). The owner is told, and told `ready` once the slots were read again, and
 * subscribes again: on the master the slots name then.
 *
 * ioredis 5 leaves a `SSUBSCRIBE` answered `MOVED` unsettled (its `commandTimeout` ends it) and
 * takes the unsubscribe a master sends when it gives a slot away for the answer of the command
 * in flight; a connection whose replies it can no longer match ("Command queue state error") is
 * dropped here and its channels reported lost. ioredis 6 settles both itself.
 */
export class ShardedSubscriber implements ChannelSubscriber {
  private readonly connections = new Map<string, NodeConnection>();
  /** A loss was reported: the next read of the slots tells the owner to subscribe again. */
  private lostSinceRefresh = false;
  /** When the owner was last told `ready`; it is told at most every {@link READY_EVERY_MS} (a failover refuses connections for seconds). */
  private readyAt = 0;
  private readyTimer: ReturnType<typeof setTimeout> | undefined;
  private closed = false;

  constructor(
    private readonly cluster: Cluster,
    private readonly connectionName: string,
    private readonly commandTimeoutMs: number,
    private readonly events: SubscriberEvents,
  ) {
    cluster.on('refresh', this.onRefresh);
  }

  get ready(): boolean {
    return this.cluster.status === 'ready' && this.cluster.slots.length > 0;
  }

  async connect(timeoutMs: number): Promise<void> {
    if (this.ready) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      new Promise<void>((resolve) => this.cluster.once('ready', resolve)),
      new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs))),
    ]);
    clearTimeout(timer);
    if (!this.ready) throw new Error('Redis Cluster is unreachable: its slots are not known');
  }

  async subscribe(channels: string[]): Promise<string[]> {
    if (this.closed) return channels;
    const bySlot = new Map<number, string[]>();
    for (const channel of channels) {
      const slot = keySlot(channel);
      let list = bySlot.get(slot);
      if (!list) bySlot.set(slot, (list = []));
      list.push(channel);
    }
    const failed: string[] = [];
    await Promise.all(
      [...bySlot].map(async ([slot, list]) => {
        try {
          const key = masterKeyOf(this.cluster, slot);
          if (!key) throw new Error(`no master is known for slot ${slot}`);
          const node = this.connection(key);
          await node.ready;
          await node.redis.ssubscribe(...list);
          if (this.connections.get(key) !== node) throw new Error(`the connection to ${key} was lost while subscribing`);
          for (const channel of list) node.channels.add(channel);
        } catch {
          failed.push(...list);
          // A stale map (the slot moved), or its master down: once the slots are read again, the owner is told `ready`.
          this.lostSinceRefresh = true;
        }
      }),
    );
    return failed;
  }

  unsubscribe(channels: string[]): void {
    const byNode = new Map<NodeConnection, string[]>();
    for (const channel of channels) {
      for (const node of this.connections.values()) {
        if (!node.channels.delete(channel)) continue;
        let list = byNode.get(node);
        if (!list) byNode.set(node, (list = []));
        list.push(channel);
      }
    }
    for (const [node, list] of byNode) {
      const bySlot = new Map<number, string[]>();
      for (const channel of list) bySlot.set(keySlot(channel), [...(bySlot.get(keySlot(channel)) ?? []), channel]);
      for (const group of bySlot.values()) node.redis.sunsubscribe(...group).catch(() => {});
    }
  }

  ping(timeoutMs: number): void {
    for (const node of this.connections.values()) {
      if (node.pinging || node.redis.status !== 'ready') continue;
      node.pinging = true;
      const timer = setTimeout(() => this.drop(node), timeoutMs);
      timer.unref?.();
      node.redis
        .ping()
        .catch(() => {}) // a dropped connection: `close` says so
        .finally(() => {
          clearTimeout(timer);
          node.pinging = false;
        });
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.readyTimer) clearTimeout(this.readyTimer);
    this.cluster.off('refresh', this.onRefresh);
    const nodes = [...this.connections.values()];
    this.connections.clear();
    await Promise.all(nodes.map((node) => node.redis.quit().catch(() => node.redis.disconnect())));
  }

  /** The connection to the master `key` (`host:port`, as the slots name it), made if there is none. */
  private connection(key: string): NodeConnection {
    const existing = this.connections.get(key);
    if (existing) return existing;
    const at = key.lastIndexOf(':');
    const redis = new Redis({
      ...this.cluster.options.redisOptions,
      host: key.slice(0, at),
      port: Number(key.slice(at + 1)),
      connectionName: this.connectionName,
      lazyConnect: true,
      enableOfflineQueue: false,
      autoResubscribe: false,
      maxRetriesPerRequest: 0,
      commandTimeout: this.commandTimeoutMs,
      // Never made again to the same node: after a failover its slots are another master's.
      retryStrategy: () => null,
    });
    const node: NodeConnection = { key, redis, channels: new Set(), ready: Promise.resolve(), pinging: false };
    this.connections.set(key, node);
    redis.on('error', (error: Error) => {
      // ioredis 5 lost the thread of its replies (an unsubscribe the master sent on its own).
      if (/Command queue state error/.test(error.message)) this.drop(node);
    });
    redis.on('smessage', (channel: string, message: string) => {
      if (node.channels.has(channel)) this.events.message(channel, message);
    });
    redis.on('moved', () => this.cluster.refreshSlotsCache());
    redis.on('close', () => this.drop(node));
    dropSilentConnections(redis, this.commandTimeoutMs);
    node.ready = redis.connect().then(
      () => undefined,
      (error: unknown) => {
        this.drop(node);
        throw error;
      },
    );
    node.ready.catch(() => {});
    return node;
  }

  /** The connection is given up: its channels are lost. */
  private drop(node: NodeConnection): void {
    if (this.connections.get(node.key) !== node) return;
    this.connections.delete(node.key);
    node.redis.disconnect();
    if (this.closed) return;
    this.lostSinceRefresh = true;
    if (node.channels.size > 0) this.events.lost([...node.channels]);
    node.channels.clear();
    this.cluster.refreshSlotsCache();
  }

  /** The slots were read again: channels whose slot another master serves now are lost here (and unsubscribed from the old one). */
  private readonly onRefresh = (): void => {
    if (this.closed) return;
    for (const node of this.connections.values()) {
      const moved = [...node.channels].filter((channel) => masterKeyOf(this.cluster, keySlot(channel)) !== node.key);
      if (moved.length === 0) continue;
      for (const channel of moved) node.channels.delete(channel);
      this.lostSinceRefresh = true;
      // The old master may still hold them (a failover it missed): unsubscribed, so nothing arrives twice.
      if (node.redis.status === 'ready') {
        const bySlot = new Map<number, string[]>();
        for (const channel of moved) bySlot.set(keySlot(channel), [...(bySlot.get(keySlot(channel)) ?? []), channel]);
        for (const group of bySlot.values()) node.redis.sunsubscribe(...group).catch(() => {});
      }
      this.events.lost(moved);
    }
    if (this.lostSinceRefresh && this.ready) this.tellReady();
  };

  private tellReady(): void {
    if (this.readyTimer || this.closed) return;
    const wait = this.readyAt + READY_EVERY_MS - Date.now();
    this.readyTimer = setTimeout(
      () => {
        this.readyTimer = undefined;
        if (this.closed || !this.lostSinceRefresh || !this.ready) return;
        this.lostSinceRefresh = false;
        this.readyAt = Date.now();
        this.events.ready();
      },
      Math.max(0, wait),
    );
    this.readyTimer.unref?.();
  }
}
