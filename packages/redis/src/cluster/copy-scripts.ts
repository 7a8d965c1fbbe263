import { LuaScript } from '../client.js';
import { BUS_POST_LUA } from './bus.js';

// A shared cluster's session is its hash (see keyspace.ts): `r` what restores it, `p` its principal.

// KEYS: the session. ARGV: the record, its principal ('' = none), its TTL, whether a missing
// record may be made ('1': the instance that created the session, which knows its principal).
// No owner: the principal of a saved record is kept, never replaced. Returns 0 when the record
// is gone and may not be made (the session was deleted: not brought back), else the principal
// saved with it ('' none).
export const SAVE_SHARED = new LuaScript(
  `local p = redis.call('HGET', KEYS[1], 'p')
if redis.call('HEXISTS', KEYS[1], 'r') == 0 then
  if ARGV[4] ~= '1' then return 0 end
  if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'p', ARGV[2]) end
  p = ARGV[2]
end
redis.call('HSET', KEYS[1], 'r', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return p or ''`,
  1,
);

// KEYS: the session, its inbox, its channel. ARGV: the 'ended' message, the bus' retention and
// max entries.
// The client's DELETE. The record goes and every instance holding a copy is told in one step, so
// a copy that missed the message finds the session gone from Redis, and the message in the
// session's inbox (pub/sub only wakes). What its streams registered stays for deleteSession.
export const END_SHARED = new LuaScript(
  `${BUS_POST_LUA}redis.call('HDEL', KEYS[1], 'r', 'p')
post(KEYS[2], KEYS[3], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]))
return 1`,
  3,
  { publishes: true },
);

// KEYS: the session. ARGV: the record as last read, the record to save instead, its TTL.
// One change (a subscription added or removed, a log level) applied to the record as it is in
// Redis, never to a copy's stale view of it: a compare-and-set, so two copies saving at once both
// keep their change. Returns 1 once saved, 0 when the record is gone (the session was deleted: not
// brought back), or the record as it is now, for the change to be applied to it again.
export const UPDATE_SHARED = new LuaScript(
  `local current = redis.call('HGET', KEYS[1], 'r')
if not current then return 0 end
if current ~= ARGV[1] then return current end
redis.call('HSET', KEYS[1], 'r', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`,
  1,
);

// KEYS: the session. ARGV: the record, its principal ('' = none), its TTL.
// After Redis lost its data, a copy writes back the record it holds, unless a copy elsewhere did first.
export const WRITE_BACK = new LuaScript(
  `if redis.call('HEXISTS', KEYS[1], 'r') == 1 then return 0 end
redis.call('HSET', KEYS[1], 'r', ARGV[1])
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'p', ARGV[2]) end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`,
  1,
);
