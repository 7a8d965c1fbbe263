import { createHash } from 'node:crypto';
import { LuaScript, type RedisClient } from './client.js';

// KEYS: the holder's quota, a sorted set of its session ids scored by when each was opened (Redis'
// clock, so instances with skewed clocks agree). ARGV: the new session id, the limit, the window in ms.
// Returns 0 once the session is counted, or how many ms until the oldest counted one leaves the
// window when the holder is at its limit (nothing is counted then).
const ADMIT = new LuaScript(
  `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return math.max(1, tonumber(oldest[2]) + window - now)
end
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('PEXPIRE', KEYS[1], window)
return 0`,
  1,
);

/**
 * How many sessions one principal (or one client address, without auth) opened across the
 * deployment within a window: at most `limit`, so that one client cannot fill Redis with sessions
 * (an instance's own caps only bound what it holds in memory: a session it lets go of lives on in
 * Redis). `<prefix>quota:{<hash of the holder>}`, one sorted set per holder, its own hash tag.
 */
export class SessionQuota {
  constructor(
    private readonly client: RedisClient,
    private readonly prefix: string,
    private readonly limit: number,
  ) {}

  /** `0` once the session counts toward `holder`'s quota; else the ms until one of its sessions leaves the window. */
  async admit(holder: string, sessionId: string, windowMs: number): Promise<number> {
    return Number(await ADMIT.run(this.client, [this.key(holder), sessionId, this.limit, windowMs]));
  }

  /** The session was deleted: it no longer counts. */
  async release(holder: string, sessionId: string): Promise<void> {
    await this.client.zrem(this.key(holder), sessionId);
  }

  private key(holder: string): string {
    // Hashed: a principal may contain anything, braces included, and the key its hash tag.
    return `${this.prefix}quota:{${createHash('sha256').update(holder).digest('base64url').slice(0, 22)}}`;
  }
}
