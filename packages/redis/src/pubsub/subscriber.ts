import type { Cluster, Redis } from 'ioredis';
import { isCluster } from '../redis-cluster.js';
import { ClassicSubscriber } from './classic.js';
import type { ChannelSubscriber, SubscriberEvents } from './events.js';
import { ShardedSubscriber } from './sharded.js';

export type { ChannelSubscriber, SubscriberEvents } from './events.js';

/** A {@link ChannelSubscriber} beside `client`, named `connectionName` (`CLIENT LIST`), commands timing out after `commandTimeoutMs`. */
export function createSubscriber(
  client: Redis | Cluster,
  connectionName: string,
  commandTimeoutMs: number,
  events: SubscriberEvents,
): ChannelSubscriber {
  return isCluster(client)
    ? new ShardedSubscriber(client, connectionName, commandTimeoutMs, events)
    : new ClassicSubscriber(client, connectionName, commandTimeoutMs, events);
}
