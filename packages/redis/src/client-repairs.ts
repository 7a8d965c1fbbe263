import type { Redis, RedisOptions } from 'ioredis';

/**
 * The repairs {@link createRedisClient} (client.ts) gives every connection it makes, to one Redis
 * or to each node of a Redis Cluster: a connection that goes silent is dropped, and (one Redis)
 * a connection that was reset is waited for a moment instead of failing the commands sent meanwhile.
 */

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
export function rideOutReconnects(client: Redis, graceMs: number): void {
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

/** How the error of a connection dropped for going silent begins. */
export const SILENT = 'Socket timeout';

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
export function dropSilentConnections(client: Redis, timeoutMs: number): void {
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
