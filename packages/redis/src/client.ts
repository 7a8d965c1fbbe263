import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';

/** How a client this package creates behaves when Redis is down or slow. */
export interface RedisClientOptions {
  /** A command with no reply within this many ms fails (and the request gets a 503). Default `2_000`. */
  commandTimeoutMs?: number;
  /** Shown by `CLIENT LIST`. */
  connectionName?: string;
}

/**
 * An ioredis client set up to fail fast instead of queueing: while Redis is unreachable every
 * command rejects at once, so clients get a 503 now and the process holds no growing backlog; it
 * reconnects on its own (every 100 ms, backing off to 2 s) and serves again when Redis is back.
 */
export function createRedisClient(url: string, options: RedisClientOptions = {}): Redis {
  const client = new Redis(url, {
    enableOfflineQueue: false,
    // In-flight commands fail at the first disconnect instead of being replayed later, out of order.
    maxRetriesPerRequest: 0,
    commandTimeout: options.commandTimeoutMs ?? 2_000,
    retryStrategy: (times) => Math.min(100 * times, 2_000),
    connectionName: options.connectionName,
  });
  // Connection errors surface on the commands that fail (as 503s and `onError`); an unhandled
  // 'error' event would crash the process.
  client.on('error', () => {});
  return client;
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

  async run(client: Redis, args: Array<string | number>): Promise<unknown> {
    try {
      return await client.evalsha(this.sha, this.keys, ...args);
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
      return client.eval(this.lua, this.keys, ...args);
    }
  }
}
