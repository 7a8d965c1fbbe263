import type { RedisClient } from './client.js';
import { checkClient, createRedisClient, type RedisSentinelTarget } from './client.js';
import type { RedisClusterTarget } from './redis-cluster.js';
import { RedisSessionCluster, type RedisSessionClusterOptions } from './cluster.js';
import { clusterMode } from './mode.js';
import { RedisEventStore, type RedisEventStoreOptions } from './events/store.js';
import { RedisTaskStore, type RedisTaskStoreOptions } from './tasks.js';

export interface RedisScaleOutOptions
  extends
    Omit<RedisEventStoreOptions, 'client' | 'url'>,
    Omit<RedisSessionClusterOptions, 'client' | 'url'>,
    Omit<RedisTaskStoreOptions, 'client' | 'url'> {
  /** Redis to connect to, e.g. `process.env.REDIS_URL`. Give this, `sentinel`, `redisCluster` or `client`. */
  url?: string;
  /** A primary with replicas behind Redis Sentinel, instead of `url`: the connections follow a failover. */
  sentinel?: RedisSentinelTarget;
  /**
   * A Redis Cluster's seed nodes (and its password, TLS, `natMap`), instead of `url`: each
   * session's keys go to the master of its slot, live tails and bus messages over sharded pub/sub.
   */
  redisCluster?: RedisClusterTarget;
  /** An ioredis client (a `Redis`, or a `Cluster`) to share instead of `url`; not closed by `McpHandler.close()`. */
  client?: RedisClient;
}

export interface RedisScaleOut {
  /** Pass as `createMcpHandler({ eventStore })`. */
  eventStore: RedisEventStore;
  /** Pass as `createMcpHandler({ cluster })`. */
  cluster: RedisSessionCluster;
  /** Pass as `createMcpHandler({ taskStore })`: tasks any instance can answer for. */
  taskStore: RedisTaskStore;
  /** The shared command connection (live tails use one more). */
  client: RedisClient;
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
  if (!options.client && !options.url && !options.sentinel && !options.redisCluster)
    throw new TypeError('createRedisScaleOut: give `url` (e.g. process.env.REDIS_URL), `sentinel`, `redisCluster` or an ioredis `client`');
  // A Redis Cluster is not one of the others: given with one, which was meant is not clear.
  const beside = (['url', 'sentinel', 'client'] as const).filter((name) => options[name] !== undefined);
  if (options.redisCluster && beside.length > 0)
    throw new TypeError(`createRedisScaleOut: give \`redisCluster\` or \`${beside[0]}\`, not both`);
  if (options.client) checkClient(options.client, 'createRedisScaleOut');
  // Checked before anything connects: a refused internalUrl leaves no connection behind.
  const { mode } = clusterMode(options, 'createRedisScaleOut');
  const owns = !options.client;
  const client =
    options.client ??
    createRedisClient(options.redisCluster ?? options.sentinel ?? (options.url as string), {
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
