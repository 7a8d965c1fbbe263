import { createHash } from 'node:crypto';
import { Redis, type Cluster, type RedisOptions } from 'ioredis';
import { pauseBefore, REDIS_RECONNECT_MS } from '@mcp-kit/core/internal';
import { dropSilentConnections, rideOutReconnects } from './client-repairs.js';
import { createClusterClient, isCluster, type RedisClusterTarget } from './redis-cluster.js';

/**
 * What the kit talks to Redis through: one connection to a Redis (standalone, or the primary
 * Sentinel names), or a Redis Cluster client that sends each command to its key's master. Every
 * command the kit sends names keys of one slot, so both serve the same keyspace.
 */
export type RedisClient = Redis | Cluster;

/**
 * A primary with replicas behind Redis Sentinel: the client asks the Sentinels where the primary
 * is, and again after each lost connection, so it follows a failover (`createRedisClient`'s
 * reconnects find the promoted replica once the Sentinels name it).
 */
export interface RedisSentinelTarget {
  /** Some or all of the Sentinels, e.g. `[{ host: 'sentinel-0', port: 26379 }]`. */
  sentinels: Array<{ host: string; port: number }>;
  /** The name the Sentinels monitor the primary under (`sentinel monitor <name> …`). */
  name: string;
  /** For the primary (`AUTH`); the Sentinels' own are `sentinelUsername` / `sentinelPassword`. */
  username?: string;
  password?: string;
  sentinelUsername?: string;
  sentinelPassword?: string;
  db?: number;
  /** TLS to the primary; `enableTLSForSentinelMode` and `sentinelTLS` for the Sentinels (ioredis' options). */
  tls?: RedisOptions['tls'];
  enableTLSForSentinelMode?: boolean;
  sentinelTLS?: RedisOptions['sentinelTLS'];
}

/** How a client this package creates behaves when Redis is down or slow. */
export interface RedisClientOptions {
  /**
   * A command with no reply within this many ms fails (and the request gets a 503). A connection
   * that has commands waiting and receives nothing for this long is dropped and made again, so
   * the commands behind it fail at once instead of each waiting this long. Default `2_000`.
   */
  commandTimeoutMs?: number;
  /** Shown by `CLIENT LIST`. */
  connectionName?: string;
}

/** Where Redis is: a `redis://` (or `rediss://`) URL, the Sentinels of a primary, or a Redis Cluster's seed nodes. */
export type RedisTarget = string | RedisSentinelTarget | RedisClusterTarget;

/**
 * An ioredis client set up to fail fast instead of queueing: while Redis is unreachable every
 * command rejects at once, so clients get a 503 now and the process holds no growing backlog; it
 * reconnects on its own (every 100 ms, backing off to 2 s) and serves again when Redis is back.
 *
 * Two network faults are not outages and are ridden out (invariant: come-back-later):
 * - A connection that stops answering (a black hole, a half-open connection a NAT forgot) is
 *   found by its first command's timeout and dropped ({@link dropSilentConnections}), not kept
 *   "ready" with every later command waiting `commandTimeoutMs` in turn (a request's four tries
 *   would take 8 s).
 * - Commands sent while a connection that was reset is made again wait for it
 *   ({@link rideOutReconnects}) instead of failing with "Stream isn't writeable": a new call's
 *   `POST` does not get a 503 because one connection dropped.
 *
 * `target` is a `redis://` URL, or the Sentinels of a primary with replicas
 * ({@link RedisSentinelTarget}): the same settings, and each reconnect asks the Sentinels where the
 * primary is now, so a failover is an outage of a few seconds like a restart. Or a Redis Cluster's
 * seed nodes ({@link RedisClusterTarget}): an ioredis `Cluster` with the same settings on every
 * node's connection (see `createClusterClient` in redis-cluster.ts).
 */
export function createRedisClient(target: string | RedisSentinelTarget, options?: RedisClientOptions): Redis;
export function createRedisClient(target: RedisClusterTarget, options?: RedisClientOptions): Cluster;
export function createRedisClient(target: RedisTarget, options?: RedisClientOptions): RedisClient;
export function createRedisClient(target: RedisTarget, options: RedisClientOptions = {}): RedisClient {
  const commandTimeoutMs = options.commandTimeoutMs ?? 2_000;
  if (typeof target !== 'string' && 'nodes' in target)
    return createClusterClient(target, { commandTimeoutMs, connectionName: options.connectionName });
  // ioredis 5's RedisOptions has no `maintNotifications`, and ignores it; ioredis 6 reads it.
  const settings: RedisOptions & { maintNotifications?: 'disabled' } = {
    enableOfflineQueue: false,
    // In-flight commands fail at the first disconnect instead of being replayed later, out of order.
    maxRetriesPerRequest: 0,
    commandTimeout: commandTimeoutMs,
    retryStrategy: (times) => pauseBefore(REDIS_RECONNECT_MS, times - 1),
    connectionName: options.connectionName,
    // ioredis 6 registers for Smart Client Handoff notices (RESP3 pushes of Redis Enterprise and
    // Redis Cloud) by default. Inside an announced maintenance it lets a command wait 10 s, not
    // `commandTimeoutMs`; on MOVING it pauses writes, which fail at once without an offline queue,
    // and swaps the socket under the client, where dropSilentConnections no longer hears it. Off:
    // the server closes the connection when the maintenance moves it, and that reset is ridden out
    // like any other (rideOutReconnects).
    maintNotifications: 'disabled',
  };
  const client =
    typeof target === 'string'
      ? new Redis(target, settings)
      : // A Sentinel that does not answer is skipped for the next one after the same timeout.
        new Redis({ ...settings, ...target, sentinelCommandTimeout: commandTimeoutMs });
  // Connection errors surface on the commands that fail (as 503s and `onError`); an unhandled
  // 'error' event would crash the process.
  client.on('error', () => {});
  dropSilentConnections(client, commandTimeoutMs);
  rideOutReconnects(client, commandTimeoutMs);
  return client;
}

/**
 * Refuses a client the user passes whose settings change what the kit writes or reads, with a
 * `TypeError` naming the setting (`where` is the caller): with `keyPrefix`, ioredis prefixes the
 * keys a script is given but not the keys the scripts build from them nor the channels they publish
 * on (a deleted session's streams stayed, live tails heard nothing); with `stringNumbers`, integer
 * replies come as strings where the kit compares numbers (every replay answered "unknown"). A Redis
 * Cluster client must read from masters (`scaleReads: 'master'`, ioredis' default): a read from a
 * replica may miss what the kit wrote a moment before.
 */
export function checkClient(client: RedisClient, where: string): void {
  const options = isCluster(client) ? { ...client.options.redisOptions, keyPrefix: client.options.keyPrefix } : client.options;
  const { keyPrefix, stringNumbers } = options;
  if (isCluster(client) && client.options.scaleReads !== undefined && client.options.scaleReads !== 'master')
    throw new TypeError(
      `${where}: the ioredis Cluster client reads from replicas (\`scaleReads\` ${JSON.stringify(String(client.options.scaleReads))}), ` +
        "which may not have what the kit wrote a moment before on the master: make it with `scaleReads: 'master'` (ioredis' default)",
    );
  if (keyPrefix)
    throw new TypeError(
      `${where}: the ioredis client has \`keyPrefix\` ${JSON.stringify(keyPrefix)}, which the kit's scripts and channels would not all get: ` +
        "make the client without it and give the kit's own `keyPrefix` option instead",
    );
  if (stringNumbers)
    throw new TypeError(
      `${where}: the ioredis client has \`stringNumbers\` on, but the kit reads Redis' integer replies as numbers: make the client without it`,
    );
}

/** Resolves once `client` is connected; with `timeoutMs`, rejects after that long. */
export function whenReady(client: RedisClient, timeoutMs?: number): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            client.off('ready', onReady);
            reject(new Error(`Redis not ready within ${timeoutMs} ms`));
          }, timeoutMs);
    const onReady = () => {
      if (timer) clearTimeout(timer);
      resolve();
    };
    client.once('ready', onReady);
  });
}

/**
 * A Lua script run with EVALSHA, loaded with EVAL the first time a server does not know it (a
 * newly promoted master, a node that restarted: both commands name the script's keys, so a
 * cluster client sends the EVAL to the master that answered NOSCRIPT).
 *
 * A script that publishes calls `publish(channel, message)` (with `publishes`), a Lua function
 * given to it here: classic `PUBLISH` on one Redis, sharded `SPUBLISH` on a Redis Cluster (so the
 * message goes to the channel's master only); the channel must then be one of the script's keys.
 */
export class LuaScript {
  /** The script with classic `PUBLISH`, and its SHA1. */
  readonly sha: string;
  private readonly lua: string;
  /** With `SPUBLISH`, for a Redis Cluster (the same as the classic one when it publishes nothing). */
  readonly shardedSha: string;
  private readonly shardedLua: string;

  constructor(
    lua: string,
    private readonly keys: number,
    options: { publishes?: boolean } = {},
  ) {
    const prelude = (command: string) =>
      options.publishes ? `local function publish(channel, message) return redis.call('${command}', channel, message) end\n` : '';
    this.lua = prelude('PUBLISH') + lua;
    this.shardedLua = prelude('SPUBLISH') + lua;
    this.sha = createHash('sha1').update(this.lua).digest('hex');
    this.shardedSha = createHash('sha1').update(this.shardedLua).digest('hex');
  }

  /** `args` are the keys, then the arguments; `keys` says how many keys (a script made with a negative count takes as many as each call gives). */
  async run(client: RedisClient, args: Array<string | number>, keys = this.keys): Promise<unknown> {
    const sharded = isCluster(client);
    try {
      return await client.evalsha(sharded ? this.shardedSha : this.sha, keys, ...args);
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
      return client.eval(sharded ? this.shardedLua : this.lua, keys, ...args);
    }
  }
}
