import { LuaScript } from '../client.js';
import { BUS_POST_LUA } from './bus.js';

// KEYS: restore record. ARGV: the record (JSON), its principal ('' = none), its ttl, whether a missing
// record may be made ('1': the instance that created the session, which knows its principal).
// A shared cluster has no owner: the principal of a saved record is kept, never replaced.
export const SAVE_SHARED = new LuaScript(
  `local old = redis.call('GET', KEYS[1])
local p
if old then
  p = cjson.decode(old).p
elseif ARGV[4] == '1' then
  if ARGV[2] == '' then p = cjson.null else p = ARGV[2] end
else
  return 0
end
local saved = '{"p":' .. cjson.encode(p) .. ',"r":' .. ARGV[1] .. '}'
redis.call('SET', KEYS[1], saved, 'PX', ARGV[3])
return saved`,
  1,
);

// KEYS: restore record, owner record, the inbox of all instances. ARGV: its channel, the 'ended'
// message, the bus' retention and max entries.
// The client's DELETE. The record goes and every instance is told in one step, so a copy that
// missed the message finds the session gone from Redis, and the message in its inbox (pub/sub only wakes).
export const END_SHARED = new LuaScript(
  `${BUS_POST_LUA}redis.call('DEL', KEYS[1], KEYS[2])
post(KEYS[3], ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]))
return 1`,
  3,
);

// KEYS: restore record. ARGV: the record as last read, the record to save instead, its ttl.
// One change (a subscription added or removed, a log level) applied to the record as it is in
// Redis, never to a copy's stale view of it: a compare-and-set, so two copies saving at once both
// keep their change. Returns 1 once saved, 0 when the record is gone (the session was deleted: not
// brought back), or the record as it is now, for the change to be applied to it again.
export const UPDATE_SHARED = new LuaScript(
  `local current = redis.call('GET', KEYS[1])
if not current then return 0 end
if current ~= ARGV[1] then return current end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1`,
  1,
);
