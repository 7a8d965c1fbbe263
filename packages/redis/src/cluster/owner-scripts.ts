import { LuaScript } from '../client.js';
import { MINE_LUA } from '../fence.js';

// KEYS: owner record, restore record. ARGV: me, my URL, principal ('' = none), instance key prefix, owner TTL.
// Returns {0} no such session, {1} another principal's, {2, restore, owner record} taken (or already
// ours), {3, owner} a live owner. The record it writes carries `e`, Redis' time of the take-over, which
// tells a later owner from an earlier one if both write their records back after Redis lost its data (see RECLAIM).
export const TAKE_OVER = new LuaScript(
  `local restore = redis.call('GET', KEYS[2])
local raw = redis.call('GET', KEYS[1])
if not restore and not raw then return {0} end
local saved = restore and cjson.decode(restore) or cjson.decode(raw)
local p = saved.p
if p == nil or p == cjson.null then p = '' end
if p ~= ARGV[3] then return {1} end
if raw then
  local owner = cjson.decode(raw)
  if owner.i == ARGV[1] then
    if restore then return {2, restore, raw} end
    return {0}
  end
  if owner.i ~= '' and redis.call('EXISTS', ARGV[4] .. owner.i) == 1 then return {3, raw} end
end
if not restore then return {0} end
local principal = cjson.null
if p ~= '' then principal = p end
local t = redis.call('TIME')
local e = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local record = cjson.encode({i = ARGV[1], u = ARGV[2], p = principal, e = e})
redis.call('SET', KEYS[1], record, 'PX', ARGV[5])
return {2, restore, record}`,
  2,
);

// KEYS: none (the keys are built from ARGV[3] and ARGV[5]). ARGV: me, ttl, owner key prefix,
// whether Redis lost its data since these records were last written ('1') or not ('0'), the
// prefix of the instances' taken sets, then (session id, record) pairs.
// Writes back each owner record that still names this instance. While Redis kept its data, one
// that names another instance was taken over while this one was away (a pause past its heartbeat
// window, a partition), and one that is gone was ended or handed off: it is returned, and this
// instance lets the session go. After Redis lost its data, one that is gone is written back (its
// owner is this instance, which had not beaten since); and of two instances that both hold a
// session (one took it over while the other was away, then the data went) the one that took it
// last keeps it, whichever beats first: `e`, Redis' time of the take-over (none: the instance
// created the session), decides, and the instance whose record is replaced finds the session in
// its taken set at its next beat.
export const RECLAIM = new LuaScript(
  `local lost = {}
for i = 6, #ARGV, 2 do
  local key = ARGV[3] .. ARGV[i]
  local raw = redis.call('GET', key)
  local write = ARGV[4] == '1'
  if raw then
    local owner = cjson.decode(raw)
    if owner.i == ARGV[1] then
      write = true
    elseif write and (tonumber(owner.e) or 0) < (tonumber(cjson.decode(ARGV[i + 1]).e) or 0) then
      redis.call('SADD', ARGV[5] .. owner.i, ARGV[i])
      redis.call('PEXPIRE', ARGV[5] .. owner.i, ARGV[2])
    else
      write = false
    end
  end
  if write then redis.call('SET', key, ARGV[i + 1], 'PX', ARGV[2]) else lost[#lost + 1] = ARGV[i] end
end
return lost`,
  0,
);

// KEYS: owner record, restore record, generation key. ARGV: me, the record, its ttl, the
// generation this instance's records were written in.
// Only while the session is this instance's (see fence.ts): a stale owner neither overwrites what
// the session's new owner keeps to restore it nor brings back a session that was ended.
export const SAVE_RECORD = new LuaScript(
  `${MINE_LUA}if not mine(KEYS[1], KEYS[3], ARGV[1], ARGV[4]) then return 0 end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return 1`,
  3,
);

// KEYS: owner record, restore record ('' = keep it), generation key. ARGV: me, the generation this
// instance's records were written in.
// Lets go of a session only while it is this instance's: a stale owner deletes nothing of the new
// one's. With no owner record while Redis kept its data, a restore record is the one an instance
// that handed the session off kept for the next: not this instance's to delete.
// With neither, the session ended already: 1, its events may go.
export const RELEASE = new LuaScript(
  `local raw = redis.call('GET', KEYS[1])
if raw then
  if cjson.decode(raw).i ~= ARGV[1] then return 0 end
elseif KEYS[2] ~= '' and redis.call('GET', KEYS[3]) == ARGV[2] and redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
redis.call('DEL', KEYS[1])
if KEYS[2] ~= '' then redis.call('DEL', KEYS[2]) end
return 1`,
  3,
);

// KEYS: none (the owner keys are built from ARGV[2]). ARGV: me, owner key prefix, then session ids.
// close(): deletes the owner records that still name this instance; one a peer took over stays the peer's.
export const RELEASE_OWNED = new LuaScript(
  `for i = 3, #ARGV do
  local key = ARGV[2] .. ARGV[i]
  local raw = redis.call('GET', key)
  if raw and cjson.decode(raw).i == ARGV[1] then redis.call('DEL', key) end
end
return 1`,
  0,
);
