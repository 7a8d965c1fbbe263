/** What a {@link ChannelSubscriber} tells its one owner (the live tails, the bus). */
export interface SubscriberEvents {
  message(channel: string, message: string): void;
  /**
   * These channels, subscribed before, are not any more (their connection dropped, or on a Redis
   * Cluster their slot moved to another master): what was published on them from then on is
   * missed until they are subscribed again, and must be read from durable state (pub/sub only wakes).
   */
  lost(channels: string[]): void;
  /** A connection came (back) up, or the slots were read again after a loss: subscribe again what was lost. */
  ready(): void;
}

/**
 * The subscriber side of pub/sub, the same to its owner whatever Redis is behind it:
 *
 * - One Redis, or a primary behind Sentinel: classic pub/sub (`SUBSCRIBE`) on one connection
 *   duplicated from the client's. Kept there rather than sharded (Redis 7 has `SSUBSCRIBE` on one
 *   node too): instances of the versions before publish with `PUBLISH`, so live tails and bus
 *   messages keep flowing between old and new instances through a rolling deploy, and one node
 *   gains nothing from sharding.
 * - A Redis Cluster: sharded pub/sub (`SSUBSCRIBE`; the scripts publish with `SPUBLISH`), so a
 *   message goes to the master of its channel's slot only, not to every node as a classic
 *   `PUBLISH` is, and the subscribers follow their slots through failovers and reshardings
 *   ({@link ShardedSubscriber}).
 */
export interface ChannelSubscriber {
  /** Whether channels can be subscribed now. */
  readonly ready: boolean;
  /** Resolves once channels can be subscribed (connecting first if need be); rejects after `timeoutMs`. */
  connect(timeoutMs: number): Promise<void>;
  /** Subscribes every channel it can; resolves with those it could not (their connection is down, their slot's master unreachable). */
  subscribe(channels: string[]): Promise<string[]>;
  unsubscribe(channels: string[]): void;
  /** Pings each connection; one that does not answer within `timeoutMs` (half-open: a NAT forgot it) is dropped, and its channels reported {@link SubscriberEvents.lost}. */
  ping(timeoutMs: number): void;
  close(): Promise<void>;
}
