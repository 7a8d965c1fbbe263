import type { Redis } from 'ioredis';
import { checkClient, createRedisClient, type RedisSentinelTarget } from './client.js';
import { RedisSessionCluster, type RedisSessionClusterOptions } from './cluster.js';
import { clusterMode } from './mode.js';
import { RedisEventStore, type RedisEventStoreOptions } from './events/store.js';
import { RedisTaskStore, type RedisTaskStoreOptions } from './tasks.js';

export interface RedisScaleOutOptions
  extends
    Omit<RedisEventStoreOptions, 'client' | 'url'>,
    Omit<RedisSessionClusterOptions, 'client' | 'url'>,
    Omit<RedisTaskStoreOptions, 'client' | 'url'> {
  /** Redis to connect to, e.g. `process.env.REDIS_URL`. Give this, `sentinel` or `client`. */
  url?: string;
  /** A primary with replicas behind Redis Sentinel, instead of `url`: the connections follow a failover. */
  sentinel?: RedisSentinelTarget;
  /** An ioredis client to share instead of `url`; not closed by `McpHandler.close()`. */
  client?: Redis;
}

export interface RedisScaleOut {
  /** Pass as `createMcpHandler({ eventStore })`. */
  eventStore: RedisEventStore;
  /** Pass as `createMcpHandler({ cluster })`. */
  cluster: RedisSessionCluster;
  /** Pass as `createMcpHandler({ taskStore })`: tasks any instance can answer for. */
  taskStore: RedisTaskStore;
  /** The shared command connection (live tails use one more). */
  client: Redis;
  /** Resolves once Redis answers and this instance's first heartbeat is written; until then requests that need Redis get 503s. */
  ready(timeoutMs?: number): Promise<void>;
}

/**
 * Everything several instances behind a plain load balancer need, on one Redis connection: the
 * shared event store (replay and live tails on any instance) and session ownership with
 * forwarding. `McpHandler.close()` closes both, and the connection if this function opened it.
 *
 * @example
 * ```ts source="../examples/redis.examples.ts#createRedisScaleOut"
 * const redis = createRedisScaleOut({ url: process.env.REDIS_URL, internalUrl: `http://${podIp}:3000/mcp` });
 * const mcp = createMcpHandler({
 *   server: () => buildServer(),
 *   eventStore: redis.eventStore,
 *   cluster: redis.cluster,
 *   taskStore: redis.taskStore,
 * });
 * ```
 */
export function createRedisScaleOut(options: RedisScaleOutOptions): RedisScaleOut {
  if (!options.client && !options.url && !options.sentinel)
    throw new TypeError('createRedisScaleOut: give `url` (e.g. process.env.REDIS_URL), `sentinel` or an ioredis `client`');
  if (options.client) checkClient(options.client, 'createRedisScaleOut');
  // Checked before anything connects: a refused internalUrl leaves no connection behind.
  const { mode } = clusterMode(options, 'createRedisScaleOut');
  const owns = !options.client;
  const client =
    options.client ??
    createRedisClient(options.sentinel ?? (options.url as string), {
      commandTimeoutMs: options.commandTimeoutMs,
      connectionName: 'mcp-kit',
    });
  // The handler closes the cluster first, then the store: the store closes the shared connection.
  const cluster = new RedisSessionCluster({ ...options, mode, client, ownsClient: false });
  const taskStore = new RedisTaskStore({ ...options, client, ownsClient: false });
  // Forwarding: a stale owner (one that was away past its heartbeat window) stores nothing in a
  // session a peer took over. Shared: nobody owns a session; each stream names its writer instead
  // (a resume elsewhere answers the call with an error if that instance stops beating mid-call).
  const eventStore = new RedisEventStore({ ...options, client, ownsClient: owns, cluster });
  return { eventStore, cluster, taskStore, client, ready: (timeoutMs) => cluster.ready(timeoutMs) };
}
