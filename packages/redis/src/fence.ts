/**
 * The owner fence of a forwarding cluster (issue 20, item 1; issue 27, item 10): a Lua function,
 * `mine(ownerKey, generationKey, me, seen)`, that the scripts writing in a session run first
 * (`APPEND`, `CREATE` and `CLOSE` of the event store, `SAVE_RECORD` and `RELEASE` of the cluster).
 *
 * A session is this instance's while its owner record (`<prefix>owner:<id>`) names it. A missing
 * record counts as its own only when Redis lost its data since this instance last wrote its
 * records: the generation key (`<prefix>generation`, without TTL, made anew by the first instance
 * that finds it gone) is missing, or not `seen`, the one this instance wrote its records in; its
 * next beat writes the record back (see `RECLAIM`). While Redis kept its data, a missing record was
 * ended, handed off or expired on purpose: nobody may write in the session until an instance takes
 * it over. `seen` is `''` before this instance's first beat went through.
 */
export const MINE_LUA = `local function mine(owner, generation, me, seen)
  local raw = redis.call('GET', owner)
  if raw then return cjson.decode(raw).i == me end
  return redis.call('GET', generation) ~= seen
end
`;

/** What a write the fence refuses fails with: no retry changes it (the store throws `StreamTakenOver`). */
export const NOT_MINE = 'mcp-kit: another instance owns this session now (or it was handed off or ended)';

/** What the event store needs to fence its writes (set by `createRedisScaleOut` in forwarding mode). */
export interface OwnerFence {
  instanceId: string;
  /** `<prefix>owner:` */
  ownerKeyPrefix: string;
  /** `<prefix>generation` */
  generationKey: string;
  /** The data generation this instance's owner records were last written in (`''` before its first beat). */
  generation(): string;
}
