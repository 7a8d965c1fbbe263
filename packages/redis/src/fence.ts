import { ScriptRefusal } from './script-errors.js';

/**
 * The owner fence of a forwarding cluster: a Lua function, `mine(session, me, force)`, that the
 * scripts writing in a session run before they write (`CREATE`, `CLOSE` and an append that Redis
 * itself refused, of the event store; `SAVE_RECORD` and `RELEASE` of the cluster).
 *
 * A session is this instance's while its owner field (`o` of `<prefix>{<id>}:s`) names it. With
 * no owner field, the session was ended, handed off or expired on purpose, or its record went
 * with Redis' data: the function raises {@link ScriptRefusal.NoOwner}, and the caller asks whether
 * the session's shard lost its data since this instance last wrote its records there (the shard's
 * generation key changed; see `cluster/shards.ts`). If so it runs the script again with `force` (`'1'`), the record only not
 * written back yet (its next beat does that); if not, the write is refused for good. No script of
 * a session reads a generation key itself: that would span two slots.
 *
 * Appends to a stream this instance already writes cost no read of the owner: a take-over fences
 * every stream of the session in Redis itself (each one's last id moved past its last frame), so a
 * stale owner's next `XADD` is refused by Redis, and only then does the script ask `mine`.
 */
export const MINE_LUA = `local function mine(session, me, force, stored)
  local owner = redis.call('HGET', session, 'o')
  if owner then return owner == me end
  if force == '1' then return true end
  return error({err = '${ScriptRefusal.NoOwner} ' .. (stored or 0) .. ' the session has no owner record'})
end
`;

/**
 * Lua: `fenceStream(key)`, what a take-over does to each stream of the session: its last id moves
 * past its last frame (unless its final frame is stored: nothing goes after that anyway), so Redis
 * refuses the next frame of the writer it had, while the instance that took the session over
 * stores its answers to the stream's lost calls past it (`<seq>-*`, see the event store's APPEND).
 */
export const FENCE_STREAM_LUA = `local function fenceStream(key)
  if redis.call('TYPE', key).ok ~= 'stream' then return end
  local last = redis.call('XREVRANGE', key, '+', '-', 'COUNT', 1)
  if #last > 0 and not (last[1][2][1] == 'f' and last[1][2][4] == '1') then
    redis.call('XSETID', key, (tonumber(string.match(last[1][1], '^(%d+)')) + 1) .. '-0')
  end
end
`;

/** What the writes of a forwarding owner need to be fenced (`RedisEventStore` gets it from its `cluster`). */
export interface OwnerFence {
  instanceId: string;
  /**
   * Whether the shard of Redis' data holding `sessionId` (all of it on one Redis; its master's
   * slots on a Redis Cluster) lost its data since this instance's owner records there were last
   * all written (then a missing one is only not written back yet).
   */
  dataLost(sessionId: string): Promise<boolean>;
}

/**
 * What an event store takes from the cluster it writes for (`RedisEventStoreOptions.cluster`):
 * in a forwarding cluster the owner fence; in a shared one the instance recorded as the writer of
 * each stream (a resume elsewhere answers its calls with an error once that instance stops
 * beating). {@link linkStore} is called once by each store that takes it.
 */
export interface StoreLink {
  readonly fence: OwnerFence | undefined;
  readonly writerId: string;
  linkStore(): void;
}
