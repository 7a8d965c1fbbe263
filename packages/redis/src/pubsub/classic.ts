import type { Redis } from 'ioredis';
import { duplicateClient } from '../client-repairs.js';
import type { ChannelSubscriber, SubscriberEvents } from './events.js';

/** Channels subscribed per command. */
const SUBSCRIBE_BATCH = 1_000;

/** Classic pub/sub on one connection, duplicated from the client (so it follows a Sentinel failover as the client does). */
export class ClassicSubscriber implements ChannelSubscriber {
  private readonly connection: Redis;
  private readonly subscribed = new Set<string>();
  private connecting: Promise<void> | undefined;
  private pinging = false;

  constructor(
    client: Redis,
    connectionName: string,
    commandTimeoutMs: number,
    private readonly events: SubscriberEvents,
  ) {
    this.connection = duplicateClient(client, {
      connectionName,
      lazyConnect: true,
      // Resubscribing is the owner's: after the SUBSCRIBE is acknowledged, it reads what it missed.
      autoResubscribe: false,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: commandTimeoutMs,
    });
    this.connection.on('error', () => {}); // reconnects by itself
    this.connection.on('message', (channel: string, message: string) => events.message(channel, message));
    this.connection.on('close', () => {
      if (this.subscribed.size === 0) return;
      const lost = [...this.subscribed];
      this.subscribed.clear();
      events.lost(lost);
    });
    this.connection.on('ready', () => events.ready());
  }

  get ready(): boolean {
    return this.connection.status === 'ready';
  }

  async connect(timeoutMs: number): Promise<void> {
    if (this.connection.status === 'wait') this.connecting = this.connection.connect().catch(() => {});
    if (this.ready) return;
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      new Promise<void>((resolve) => this.connection.once('ready', resolve)),
      new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs))),
      this.connecting,
    ]);
    clearTimeout(timer);
    if (!this.ready) throw new Error('Redis is unreachable: the subscriber connection is down');
  }

  async subscribe(channels: string[]): Promise<string[]> {
    for (let i = 0; i < channels.length; i += SUBSCRIBE_BATCH) {
      const batch = channels.slice(i, i + SUBSCRIBE_BATCH);
      try {
        await this.connection.subscribe(...batch);
      } catch {
        return channels.slice(i);
      }
      for (const channel of batch) this.subscribed.add(channel);
    }
    return [];
  }

  unsubscribe(channels: string[]): void {
    const held = channels.filter((c) => this.subscribed.delete(c));
    if (held.length > 0) this.connection.unsubscribe(...held).catch(() => {});
  }

  ping(timeoutMs: number): void {
    if (this.pinging || !this.ready) return;
    this.pinging = true;
    const connection = this.connection;
    const timer = setTimeout(() => connection.stream?.destroy(new Error(`no answer to a ping within ${timeoutMs} ms`)), timeoutMs);
    timer.unref?.();
    connection
      .ping()
      .catch(() => {}) // a dropped connection: `close` says so
      .finally(() => {
        clearTimeout(timer);
        this.pinging = false;
      });
  }

  async close(): Promise<void> {
    this.subscribed.clear();
    await this.connection.quit().catch(() => this.connection.disconnect());
  }
}
