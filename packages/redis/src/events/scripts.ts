import { LuaScript } from '../client.js';
import { MINE_LUA } from '../fence.js';
import { REFUSE_LUA, ScriptRefusal } from '../script-errors.js';

// What every script of a stream shares. A stream's key is a Redis stream whose entries are
// `<seq>-<n>` with fields `f` (the frame) and `e` ('1' on the final frame), or a string holding
// its only frame when that frame was its final one (a call answered at once: a string costs Redis
// a tenth of a stream). An entry `0-1` (seq 0) marks a stream made before its first frame.
const COMMON = `${REFUSE_LUA}${MINE_LUA}local function seqOf(id) return tonumber(string.match(id, '^(%d+)')) end
local function isFinal(fields) return fields[1] == 'f' and fields[4] == '1' end
local function registered(session, stream)
  local prefix = '["' .. stream .. '"'
  for _, v in ipairs(redis.call('HVALS', session)) do
    if string.sub(v, 1, #prefix) == prefix then return v end
  end
  return nil
end
`;

// KEYS: the session. ARGV: the writer's field, its value ([stream id, writer instance, request
// ids], JSON), this instance ('' = no fence), force ('1': Redis lost its data since this
// instance's records were written, see fence.ts), the TTL of a session hash made here.
// Registers a stream before its priming event goes out: its `.0` cursor is valid on any instance,
// and an instance that takes the session over finds the requests it answers (see unfinished).
// With a fence, an instance whose session it is not opens no stream in it. Otherwise the hash
// gets a TTL if this made it (`NX`: never shortens the session's own).
export const CREATE = new LuaScript(
  `${COMMON}if ARGV[3] ~= '' then
  if not mine(KEYS[1], ARGV[3], ARGV[4]) then refuse('${ScriptRefusal.NotMine}', 0, 'another instance owns this session now (or it was handed off or ended)') end
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  if ARGV[4] == '1' then redis.call('PEXPIRE', KEYS[1], ARGV[5], 'NX') end
  return 1
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[5], 'NX')
return 1`,
  1,
);

// KEYS: the stream, its session. ARGV: this instance ('' = no fence), force, maxlen, the TTL of a
// stream key made here, flags ('n': the first of these frames starts the stream; 'v': check the
// first for a gap (the connection is new: Redis may have lost what it acknowledged); 'f': this
// instance does not write the stream (it answers a lost call); 'l': store the final frame past
// frames Redis lost), the stream's id, then (seq, frame, final) for each frame, in order.
// Per frame, one XADD (NOMKSTREAM: a stream that is gone is not made again without the checks)
// and one publish (PUBLISH; SPUBLISH on a Redis Cluster) for the live tails on other instances: nothing else. Redis itself refuses an
// entry id at or below the stream's last, and that is when the checks run: a frame already stored
// (a retry whose reply was lost) is not stored twice; nothing goes after a final frame (another
// instance's answer to a lost call moves the last id to the end, `XSETID`); a take-over fences a
// stale owner out (it moved the last id past the last frame) while the new owner writes `<seq>-*`;
// a frame whose predecessor is missing is refused (the writer sends a stream's frames one batch
// at a time, so that happens only when Redis lost acknowledged frames: checked on a new connection).
// Returns how many frames are stored; a refusal says how many went in before it.
export const APPEND = new LuaScript(
  `${COMMON}local me, force, maxlen, ttl, flags, id = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local foreign = string.find(flags, 'f', 1, true) ~= nil
local pastLoss = string.find(flags, 'l', 1, true) ~= nil
local function checked(stored, seq)
  local kind = redis.call('TYPE', KEYS[1]).ok
  if kind == 'string' then
    if seq <= 1 then return 'stored' end
    refuse('${ScriptRefusal.Complete}', stored, 'this stream is complete (another instance answered it)')
  end
  if kind == 'stream' then
    local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
    if #last > 0 then
      local lastSeq = seqOf(last[1][1])
      if lastSeq >= seq then return 'stored' end
      if isFinal(last[1][2]) then refuse('${ScriptRefusal.Complete}', stored, 'this stream is complete (another instance answered it)') end
      if lastSeq < seq - 1 and not pastLoss then refuse('${ScriptRefusal.Gap}', stored, (lastSeq + 1) .. ' is the first frame of this stream not stored yet') end
    end
  end
  if me ~= '' and not mine(KEYS[2], me, force, stored) then refuse('${ScriptRefusal.NotMine}', stored, 'another instance owns this session now (or it was handed off or ended)') end
  return kind
end
local n = (#ARGV - 6) / 3
for i = 0, n - 1 do
  local seq, frame, final = tonumber(ARGV[7 + 3 * i]), ARGV[8 + 3 * i], ARGV[9 + 3 * i]
  local first = i == 0 and string.find(flags, 'n', 1, true) ~= nil
  local written = false
  if not (foreign or pastLoss or (i == 0 and string.find(flags, 'v', 1, true))) then
    if first and final == '1' and seq == 1 then
      written = redis.call('SET', KEYS[1], frame, 'PX', ttl, 'NX') ~= false
    elseif first then
      written = type(redis.pcall('XADD', KEYS[1], 'MAXLEN', maxlen, seq .. '-0', 'f', frame, 'e', final)) == 'string'
      if written then redis.call('PEXPIRE', KEYS[1], ttl) end
    else
      written = type(redis.pcall('XADD', KEYS[1], 'NOMKSTREAM', 'MAXLEN', maxlen, seq .. '-0', 'f', frame, 'e', final)) == 'string'
    end
  end
  local published = written
  if not written then
    local kind = checked(i, seq)
    if kind ~= 'stored' then
      -- Made again (its key expired, or went with Redis' data), or never registered: listed for deleteSession and unfinished.
      if kind == 'none' and redis.call('HSETNX', KEYS[2], 'c:' .. id, '["' .. id .. '","",[]]') == 1 then
        redis.call('PEXPIRE', KEYS[2], ttl, 'NX')
      end
      if kind == 'none' and final == '1' and seq == 1 then
        redis.call('SET', KEYS[1], frame, 'PX', ttl)
      else
        if kind == 'none' then
          redis.call('XADD', KEYS[1], 'MAXLEN', maxlen, seq .. '-0', 'f', frame, 'e', final)
          redis.call('PEXPIRE', KEYS[1], ttl)
        else
          redis.call('XADD', KEYS[1], 'MAXLEN', maxlen, seq .. '-*', 'f', frame, 'e', final)
        end
        if foreign and final == '1' then redis.call('XSETID', KEYS[1], '18446744073709551615-18446744073709551615') end
      end
      published = true
    end
  end
  if published then publish(KEYS[1], seq .. ' ' .. final .. ' ' .. frame) end
end
return n`,
  2,
  { publishes: true },
);

// KEYS: the stream, its retry key, its session. ARGV: afterSeq, id of the first entry to return,
// the TTL of a running stream, the stream's id.
// A client still polling a running stream keeps its keys alive. Returns {0} unknown, {1[, final
// frame]} evicted, or {2, lastSeq, complete, retry or -1, frames...}. A replay that is not
// contiguous (a frame lost in a Redis restart) counts as evicted: never partial. A stream
// registered whose first frame is not stored yet replays nothing after `.0`.
export const REPLAY = new LuaScript(
  `${COMMON}local after = tonumber(ARGV[1])
local function retry() return tonumber(redis.call('GET', KEYS[2]) or '-1') end
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'none' then
  if after == 0 and registered(KEYS[3], ARGV[4]) then return {2, 0, 0, retry()} end
  return {0}
end
if kind == 'string' then
  if after == 0 then return {2, 1, 1, retry(), redis.call('GET', KEYS[1])} end
  if after == 1 then return {2, 1, 1, retry()} end
  return {0}
end
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #last == 0 then return {0} end
local lastSeq = seqOf(last[1][1])
local complete = 0
if isFinal(last[1][2]) then complete = 1 end
if after > lastSeq then return {0} end
local gap = {1}
if complete == 1 then gap = {1, last[1][2][2]} end
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
if seqOf(first[1][1]) > after + 1 then return gap end
local out = {2, lastSeq, complete, retry()}
if complete == 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
local entries = redis.call('XRANGE', KEYS[1], ARGV[2], '+')
for i = 1, #entries do
  if seqOf(entries[i][1]) ~= after + i then return gap end
  out[i + 4] = entries[i][2][2]
end
return out`,
  3,
);

// KEYS: the stream, its retry key, its session. ARGV: afterSeq, retryMs, ttl, this instance (''
// = no fence), force.
// Keeps the close's retry for resumes on any instance, and tells the live tails to end; with a
// fence, only while the session is this instance's (see fence.ts).
export const CLOSE = new LuaScript(
  `${COMMON}if ARGV[4] ~= '' and not mine(KEYS[3], ARGV[4], ARGV[5]) then refuse('${ScriptRefusal.NotMine}', 0, 'another instance owns this session now (or it was handed off or ended)') end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
publish(KEYS[1], ARGV[1] .. ' c ' .. ARGV[2])
return 1`,
  3,
  { publishes: true },
);

// KEYS: the session, then each of its streams and that stream's retry key. The session ends: its
// streams go, their live tails are told, and its registrations with it.
export const DELETE = new LuaScript(
  `for i = 2, #KEYS, 2 do
  redis.call('DEL', KEYS[i], KEYS[i + 1])
  publish(KEYS[i], '0 d')
end
redis.call('DEL', KEYS[1])
return (#KEYS - 1) / 2`,
  -1,
  { publishes: true },
);

// KEYS: the stream, its session. ARGV: the stream's id.
// Returns {0} unknown, or {1, writer ('' unknown), lastSeq, complete (0/1), request ids JSON ('' none)}.
export const WRITER = new LuaScript(
  `${COMMON}local kind = redis.call('TYPE', KEYS[1]).ok
local found = registered(KEYS[2], ARGV[1])
local writer, requests = '', ''
if found then
  local r = cjson.decode(found)
  writer = r[2]
  requests = cjson.encode(r[3])
end
if kind == 'string' then return {1, writer, 1, 1, requests} end
if kind == 'none' then
  if found then return {1, writer, 0, 0, requests} end
  return {0}
end
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #last == 0 then return {0} end
local complete = 0
if isFinal(last[1][2]) then complete = 1 end
return {1, writer, seqOf(last[1][1]), complete, requests}`,
  2,
);
