import { Cluster, type ClusterOptions, type Redis, type RedisOptions } from 'ioredis';
import { pauseBefore, REDIS_RECONNECT_MS } from '@mcp-kit/core/internal';
import { dropSilentConnections } from './client-repairs.js';

/**
 * A Redis Cluster (self-hosted, or a cluster-mode managed Redis: ElastiCache, MemoryDB,
 * Memorystore Cluster, Azure Managed Redis with the OSS cluster policy): the client asks the seed
 * nodes which master serves which slot, sends each command to its key's master, follows `MOVED`
 * and `ASK` while slots move, and finds a promoted replica after a failover.
 */
export interface RedisClusterTarget {
  /** Some or all of the cluster's nodes, e.g. `[{ host: 'redis-0', port: 6379 }]` or a managed service's configuration endpoint. */
  nodes: Array<{ host: string; port: number }>;
  /** For every node (`AUTH`). */
  username?: string;
  password?: string;
  /** TLS to every node (managed services require it: `tls: {}`), as ioredis takes it. */
  tls?: RedisOptions['tls'];
  /**
   * Where the nodes are reachable when the addresses they announce are not (a cluster behind NAT,
   * in Docker, on Kubernetes without host networking): `{ '10.0.0.1:6379': { host, port } }` or a
   * function of `host:port`, as ioredis takes it.
   */
  natMap?: ClusterOptions['natMap'];
  /**
   * How the seed nodes' host names are resolved (ioredis resolves them to IP addresses first). With
   * TLS to a managed service whose certificate names its host, keep the name:
   * `dnsLookup: (address, callback) => callback(null, address)`.
   */
  dnsLookup?: ClusterOptions['dnsLookup'];
}

/** How the commands of one client reach a Redis Cluster's nodes, and how it follows them. */
export interface ClusterClientSettings {
  commandTimeoutMs: number;
  connectionName: string | undefined;
}

/**
 * A `Cluster` set up as `createRedisClient` sets up one connection: commands fail at once while
 * their slot's master is unreachable (no offline queue), each within `commandTimeoutMs`; a
 * connection to a node that goes silent is dropped (each node's, not only one); topology changes
 * are found within a second or two even with no command redirected.
 *
 * ioredis' own ways through a failover and a resharding are kept: a command whose connection
 * closed, or that met `CLUSTERDOWN` or `TRYAGAIN`, is sent again 100 ms later (at most 16 times,
 * and never past `commandTimeoutMs`), after the slots are read again; `MOVED` and `ASK` are
 * followed at once. A command sent again may have run already: every script of the kit's is
 * written so that running it twice stores what running it once does (an append finds its frames
 * stored, a take-over finds itself the owner, a bus message keeps the id of its first post).
 */
export function createClusterClient(target: RedisClusterTarget, settings: ClusterClientSettings): Cluster {
  const { commandTimeoutMs } = settings;
  // ioredis 5's RedisOptions has no `maintNotifications`, and ignores it; ioredis 6 reads it (see createRedisClient).
  const redisOptions: NonNullable<ClusterOptions['redisOptions']> & { maintNotifications?: 'disabled' } = {
    commandTimeout: commandTimeoutMs,
    maxRetriesPerRequest: 0,
    connectionName: settings.connectionName,
    maintNotifications: 'disabled',
    ...(target.username === undefined ? {} : { username: target.username }),
    ...(target.password === undefined ? {} : { password: target.password }),
    ...(target.tls === undefined ? {} : { tls: target.tls }),
  };
  const cluster = new Cluster(target.nodes, {
    enableOfflineQueue: false,
    redisOptions,
    clusterRetryStrategy: (times) => pauseBefore(REDIS_RECONNECT_MS, times - 1),
    slotsRefreshTimeout: commandTimeoutMs,
    // A slot moved or a replica promoted is found by this read as well as by the next MOVED: the
    // sharded subscribers follow their channels' slots from it (see sharded-subscriber.ts).
    slotsRefreshInterval: 1_000,
    ...(target.natMap === undefined ? {} : { natMap: target.natMap }),
    ...(target.dnsLookup === undefined ? {} : { dnsLookup: target.dnsLookup }),
  });
  cluster.on('error', () => {});
  eachNode(cluster, (node) => dropSilentConnections(node, commandTimeoutMs));
  return cluster;
}

/** Whether `client` is a Redis Cluster client (ioredis' `Cluster`). */
export function isCluster(client: Redis | Cluster): client is Cluster {
  return (client as { isCluster?: boolean }).isCluster === true;
}

/**
 * Calls `each` with every node connection `cluster` has and makes from now on (ioredis makes them
 * as slots name them); returns what stops it for the connections made later.
 */
export function eachNode(cluster: Cluster, each: (node: Redis) => void): () => void {
  for (const node of cluster.nodes('all')) each(node);
  cluster.on('+node', each);
  return () => void cluster.off('+node', each);
}

/**
 * Follows the connections of `client` (one Redis, or every node of a Redis Cluster): `lost` when
 * one that was up closes, `ready` when one is up (again). Returns what stops following.
 */
export function followConnections(client: Redis | Cluster, on: { lost(): void; ready(): void }): () => void {
  const lost = () => on.lost();
  const ready = () => on.ready();
  if (!isCluster(client)) {
    client.on('close', lost);
    client.on('ready', ready);
    return () => {
      client.off('close', lost);
      client.off('ready', ready);
    };
  }
  // A node's connection counts as lost only once it was up: ioredis makes and drops connections to
  // nodes it never used as it reads the slots (the seeds, replicas).
  const followed = new Map<Redis, { ready(): void; close(): void }>();
  const stop = eachNode(client, (node) => {
    let up = node.status === 'ready';
    const listeners = {
      ready: () => {
        up = true;
        ready();
      },
      close: () => {
        if (!up) return;
        up = false;
        lost();
      },
    };
    followed.set(node, listeners);
    node.on('ready', listeners.ready);
    node.on('close', listeners.close);
    node.once('end', () => followed.delete(node));
  });
  // The cluster is ready once its slots are read: what needs them (the shards) can be done.
  client.on('ready', ready);
  return () => {
    stop();
    client.off('ready', ready);
    for (const [node, listeners] of followed) {
      node.off('ready', listeners.ready);
      node.off('close', listeners.close);
    }
    followed.clear();
  };
}

/** The master node serving `slot` now, as `cluster` last read its slots (`host:port`), if it knows. */
export function masterKeyOf(cluster: Cluster, slot: number): string | undefined {
  return cluster.slots[slot]?.[0];
}

/** How long a command of `cluster` waits for its reply (its nodes' `commandTimeout`), if it says. */
export function commandTimeoutOf(cluster: Cluster): number | undefined {
  return cluster.options.redisOptions?.commandTimeout;
}
