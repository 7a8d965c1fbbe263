import { LuaScript } from '../client.js';
import { FENCE_STREAM_LUA, MINE_LUA } from '../fence.js';
import { REFUSE_LUA, ScriptRefusal } from '../script-errors.js';

// The owner of a session is fields of its hash (see keyspace.ts): `o` the instance, `u` its
// internal URL, `e` Redis' time of the take-over (none: the instance created the session). `e`
// tells a later owner from an earlier one if both write their records back after Redis lost its
// data (see RECLAIM).

// KEYS: the session. ARGV: me, my URL, the principal ('' = none), the TTL until its record is saved.
// The instance that answers `initialize` owns the session it makes.
export const CLAIM = new LuaScript(
  `redis.call('HSET', KEYS[1], 'o', ARGV[1], 'u', ARGV[2])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'p', ARGV[3]) end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1`,
  1,
);

// KEYS: the session, then each stream registered in it. ARGV: me, my URL, the owner it had when
// read ('' = none).
// Takes the session over, compare-and-set: 0 when its owner changed since it was read (read it
// again). Fences the old owner out of every stream it still writes: each one's last id is moved
// past its last frame, so Redis refuses the old owner's next frame, while this instance answers
// the stream's lost calls after it (`<seq>-*`, see the event store's APPEND).
export const TAKE_OVER = new LuaScript(
  `${FENCE_STREAM_LUA}if (redis.call('HGET', KEYS[1], 'o') or '') ~= ARGV[3] then return 0 end
local t = redis.call('TIME')
local e = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], 'o', ARGV[1], 'u', ARGV[2], 'e', e)
for i = 2, #KEYS do fenceStream(KEYS[i]) end
return e`,
  -1,
);

// KEYS: the session. ARGV: me, my URL, the time this instance took the session over ('' = it
// created it), whether Redis lost its data since its records were last written ('1') or not
// ('0'), the TTL of a session hash written back, its principal ('' = none).
// After this instance was away (its instance key expired), a check of one session it holds:
// 1 still its own; 0 not any more (taken over while it was away, or ended or handed off on
// purpose), and it lets the session go; {2, id} its own again, taken back from instance `id`,
// which is told (its taken set). After Redis lost its data, a missing owner is written back (this
// instance had not beaten since), and of two instances that both hold the session (one took it
// over while the other was away, then the data went) the one that took it last keeps it,
// whichever beats first.
export const RECLAIM = new LuaScript(
  `local owner = redis.call('HGET', KEYS[1], 'o')
if owner == ARGV[1] then return 1 end
local mine = {'o', ARGV[1], 'u', ARGV[2]}
if ARGV[3] ~= '' then mine = {'o', ARGV[1], 'u', ARGV[2], 'e', ARGV[3]} end
if owner then
  if ARGV[4] == '1' and (tonumber(redis.call('HGET', KEYS[1], 'e')) or 0) < (tonumber(ARGV[3]) or 0) then
    redis.call('HSET', KEYS[1], unpack(mine))
    return {2, owner}
  end
  return 0
end
if ARGV[4] ~= '1' then return 0 end
redis.call('HSET', KEYS[1], unpack(mine))
if ARGV[6] ~= '' then redis.call('HSET', KEYS[1], 'p', ARGV[6]) end
redis.call('PEXPIRE', KEYS[1], ARGV[5], 'NX')
return 1`,
  1,
);

// KEYS: the session. ARGV: me, the record, its TTL, force (see fence.ts).
// Only while the session is this instance's: a stale owner neither overwrites what the session's
// new owner keeps to restore it nor brings back a session that was ended. The principal stays the
// one its claim wrote.
export const SAVE_RECORD = new LuaScript(
  `${REFUSE_LUA}${MINE_LUA}if not mine(KEYS[1], ARGV[1], ARGV[4]) then return 0 end
redis.call('HSET', KEYS[1], 'r', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`,
  1,
);

// KEYS: the session. ARGV: me, '1' to keep the record (a hand-off), force (see fence.ts).
// Lets go of a session only while it is this instance's: a stale owner deletes nothing of the new
// one's. With no owner while Redis kept its data, a record is the one an instance that handed the
// session off kept for the next: not this instance's to delete (the caller asks, see fence.ts).
// With neither, the session ended already: 1, its events may go. What the session's streams
// registered stays for the event store's deleteSession.
export const RELEASE = new LuaScript(
  `${REFUSE_LUA}local owner = redis.call('HGET', KEYS[1], 'o')
if owner then
  if owner ~= ARGV[1] then return 0 end
elseif ARGV[2] ~= '1' and ARGV[3] ~= '1' and redis.call('HEXISTS', KEYS[1], 'r') == 1 then
  refuse('${ScriptRefusal.NoOwner}', 0, 'the session has no owner record')
end
redis.call('HDEL', KEYS[1], 'o', 'u', 'e')
if ARGV[2] ~= '1' then redis.call('HDEL', KEYS[1], 'r', 'p') end
return 1`,
  1,
);

// KEYS: the session. ARGV: me.
// close(): the owner fields go while they still name this instance; one a peer took over stays the peer's.
export const RELEASE_OWNED = new LuaScript(
  `if redis.call('HGET', KEYS[1], 'o') == ARGV[1] then redis.call('HDEL', KEYS[1], 'o', 'u', 'e') end
return 1`,
  1,
);
