import type { Redis } from 'ioredis';
import type { RestoreRecord } from '@mcp-kit/core';
import { LuaScript } from '../client.js';
import { FENCE_STREAM_LUA } from '../fence.js';
import type { Keyspace } from '../keyspace.js';

/**
 * The keyspace before 0.2, read when the current one has nothing of a session, so that a session
 * live across a rolling deploy survives it: an instance of this version finds a session an
 * instance of the old one made (`<prefix>owner:<id>` and `<prefix>restore:<id>`, no hash tag), and
 * forwards to its owner while that one beats, or moves the session into the current keyspace once
 * it is gone (forwarding), or writes its record into the current keyspace and restores from it
 * (shared). The other way does not work: an old instance
 * does not know a session made by a new one (it answers `404`). Nothing here writes the old keys
 * but the old owner record of a session moved over, which names its new owner so that an old
 * instance that was away forwards to it and stores nothing in it.
 */
export interface LegacySession {
  owner?: { instanceId: string; url: string };
  record?: { principal: string | undefined; record: RestoreRecord; ttlMs: number };
}

export async function readLegacy(client: Redis, keys: Keyspace, sessionId: string, withRecord: boolean): Promise<LegacySession> {
  // Separate commands: the old keys carry no hash tag (they never ran on a cluster).
  const [owner, record, ttlMs] = await Promise.all([
    client.get(keys.legacy.owner(sessionId)),
    withRecord ? client.get(keys.legacy.record(sessionId)) : null,
    withRecord ? client.pttl(keys.legacy.record(sessionId)) : -2,
  ]);
  const found: LegacySession = {};
  try {
    if (owner !== null) {
      const o = JSON.parse(owner) as { i?: string; u?: string };
      if (typeof o.i === 'string' && o.i !== '') found.owner = { instanceId: o.i, url: o.u ?? '' };
    }
    if (record !== null) {
      const r = JSON.parse(record) as { p?: string | null; r?: RestoreRecord };
      if (r.r?.initialize) found.record = { principal: r.p ?? undefined, record: r.r, ttlMs: ttlMs > 0 ? ttlMs : 30 * 60_000 };
    }
  } catch {
    // not a record of ours
  }
  return found;
}

/** The old set of a session's streams (same slot as the session), and each one's old request ids key. */
export async function legacyStreams(client: Redis, keys: Keyspace, sessionId: string): Promise<string[]> {
  return client.smembers(keys.legacy.streams(sessionId)).catch(() => []);
}

// KEYS: the session, then each old stream of it and that stream's old request ids key. ARGV: me,
// my URL, the record, its principal ('' = none), its TTL, then each old stream's id.
// Forwarding: moves a session an old instance owned (now gone) into the current keyspace, as a
// take-over: this instance owns it, its old streams are registered (their lost calls are answered
// as any) and fenced (their last id moved past their last frame). 0 when the session is in the
// current keyspace already (another instance moved it first): read it again.
export const MOVE_OVER = new LuaScript(
  `${FENCE_STREAM_LUA}if redis.call('HEXISTS', KEYS[1], 'o') == 1 or redis.call('HEXISTS', KEYS[1], 'r') == 1 then return 0 end
local t = redis.call('TIME')
local e = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], 'o', ARGV[1], 'u', ARGV[2], 'e', e, 'r', ARGV[3])
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'p', ARGV[4]) end
for i = 2, #KEYS, 2 do
  local n = i / 2
  local id = ARGV[5 + n]
  redis.call('HSET', KEYS[1], 'c:legacy.' .. n, '["' .. id .. '","",' .. (redis.call('GET', KEYS[i + 1]) or '[]') .. ']')
  fenceStream(KEYS[i])
end
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return e`,
  -1,
);
