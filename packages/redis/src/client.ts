import { createHash } from 'node:crypto';
import { Redis, type RedisOptions } from 'ioredis';
import { pauseBefore, REDIS_RECONNECT_MS } from '@mcp-kit/core/internal';

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
 * primary is now, so a failover is an outage of a few seconds like a restart.
 */
export function createRedisClient(target: string | RedisSentinelTarget, options: RedisClientOptions = {}): Redis {
  const commandTimeoutMs = options.commandTimeoutMs ?? 2_000;
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

/** Clients made by {@link createRedisClient}: their offline queue is only ever on for a moment. */
const managed = new WeakSet<Redis>();

/**
 * A connection that was up and is lost by a reset (not by going silent) is made again, and until
 * that first reconnect is ready or fails, for `graceMs` at most, commands wait for it in ioredis'
 * offline queue (each still at most its `commandTimeout`) instead of failing at once. A reconnect
 * that fails (Redis is down, not a dropped connection) rejects them and ends the grace: commands
 * fail at once again, as through any outage, and the requests that wait meanwhile are few (a
 * request that waited through an outage would run the moment Redis is back, before the instances
 * have beaten again, and take a live instance's sessions over). A connection dropped for going
 * silent gets no grace: the network does not answer, the next one will not either.
 */
function rideOutReconnects(client: Redis, graceMs: number): void {
  managed.add(client);
  let wasReady = false;
  let silent = false;
  let grace: ReturnType<typeof setTimeout> | undefined;
  const endGrace = () => {
    if (grace) clearTimeout(grace);
    grace = undefined;
    client.options.enableOfflineQueue = false;
  };
  client.on('ready', () => {
    wasReady = true;
    silent = false;
    endGrace();
  });
  // The message of a connection dropped for going silent (see dropSilentConnections).
  client.on('error', (error: Error) => {
    if (error.message.startsWith(SILENT)) silent = true;
  });
  client.on('close', () => {
    const reset = wasReady && !silent;
    wasReady = false;
    silent = false;
    endGrace();
    if (!reset || client.status === 'end') return;
    client.options.enableOfflineQueue = true;
    grace = setTimeout(endGrace, graceMs);
    grace.unref?.();
  });
}

const SILENT = 'Socket timeout';

/**
 * Drops a connection that has replies due and has received nothing for `timeoutMs` (a black hole,
 * a half-open connection), as ioredis' `socketTimeout` would; ioredis then connects again. Not
 * `socketTimeout` itself: it arms a timer and a listener for every reply (about 2% of an
 * instance's CPU when a burst goes through Redis, in a profile), and ioredis 5 leaves one armed
 * past a reset, which then destroys the next connection (redis/ioredis#2147). Here each connection
 * has one `data` listener, and one timer per client looks 32 times per `timeoutMs` (a length
 * check): a silent connection goes between `timeoutMs` and `timeoutMs` + a sixteenth of it after
 * its oldest reply was due, never before.
 */
function dropSilentConnections(client: Redis, timeoutMs: number): void {
  timeouts.set(client, timeoutMs);
  let lastData = Date.now();
  // Since when, as far as the checks saw, replies have been due without a pause.
  let dueSince: number | undefined;
  const heard = () => (lastData = Date.now());
  client.on('connect', () => {
    lastData = Date.now();
    dueSince = undefined;
    client.stream.on('data', heard);
  });
  const timer = setInterval(
    () => {
      if (client.commandQueue.length === 0) return void (dueSince = undefined);
      const now = Date.now();
      dueSince ??= now;
      if (now - Math.max(dueSince, lastData) < timeoutMs) return;
      dueSince = undefined;
      client.stream.destroy(new Error(`${SILENT}: no data for ${timeoutMs} ms while replies were due`));
    },
    Math.max(10, Math.floor(timeoutMs / 32)),
  );
  timer.unref?.();
  client.once('end', () => clearInterval(timer));
}

/** The timeout each client made here drops a silent connection after, for its duplicates. */
const timeouts = new WeakMap<Redis, number>();

/**
 * `client.duplicate(options)` (a subscriber connection) with {@link createRedisClient}'s repairs,
 * and with the offline queue off unless `options` turn it on (a duplicate made while `client`
 * rides out a reconnect would otherwise copy it on).
 */
export function duplicateClient(client: Redis, options: RedisOptions): Redis {
  const duplicate = client.duplicate({ ...(managed.has(client) ? { enableOfflineQueue: false } : {}), ...options });
  const timeoutMs = timeouts.get(client);
  if (timeoutMs !== undefined) dropSilentConnections(duplicate, timeoutMs);
  return duplicate;
}

/**
 * Refuses a client the user passes whose settings change what the kit writes or reads, with a
 * `TypeError` naming the setting (`where` is the caller): with `keyPrefix`, ioredis prefixes the
 * keys a script is given but not the keys the scripts build from them nor the channels they publish
 * on (a deleted session's streams stayed, live tails heard nothing); with `stringNumbers`, integer
 * replies come as strings where the kit compares numbers (every replay answered "unknown").
 */
export function checkClient(client: Redis, where: string): void {
  const { keyPrefix, stringNumbers } = client.options;
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
export function whenReady(client: Redis, timeoutMs?: number): Promise<void> {
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

/** A Lua script run with EVALSHA, loaded with EVAL the first time a server does not know it. */
export class LuaScript {
  private readonly sha: string;
  constructor(
    private readonly lua: string,
    private readonly keys: number,
  ) {
    this.sha = createHash('sha1').update(lua).digest('hex');
  }

  /** `args` are the keys, then the arguments; `keys` says how many keys (a script made with a negative count takes as many as each call gives). */
  async run(client: Redis, args: Array<string | number>, keys = this.keys): Promise<unknown> {
    try {
      return await client.evalsha(this.sha, keys, ...args);
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
      return client.eval(this.lua, keys, ...args);
    }
  }
}
