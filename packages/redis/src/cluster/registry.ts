import { randomUUID } from 'node:crypto';
import type { RedisClient } from '../client.js';
import type { SessionOwner } from '@mcp-kit/core';
import { LuaScript } from '../client.js';
import { checkEvictionPolicy } from '../eviction.js';
import { HopSigner, sharedHopSecret } from '../hop.js';
import { commandTimeoutOf, followConnections, isCluster } from '../redis-cluster.js';
import { Shards, type Shard } from './shards.js';
import type { Keyspace } from '../keyspace.js';

// KEYS: the instances' index, their URLs. ARGV: this instance's id, its internal URL, how long
// after its last beat an instance counts as gone.
// Scores are Redis' own clock, so instances with skewed clocks agree; the long gone are dropped,
// with their URLs. Both keys share one hash tag: written once per beat per instance, never hot.
const BEAT_INDEX = new LuaScript(
  `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[3])
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - 10 * window)
if #gone > 0 then
  redis.call('ZREM', KEYS[1], unpack(gone))
  redis.call('HDEL', KEYS[2], unpack(gone))
end
redis.call('PEXPIRE', KEYS[1], 10 * window)
redis.call('PEXPIRE', KEYS[2], 10 * window)
return 1`,
  2,
);

// KEYS: the instances' index, their URLs. ARGV: me, the window.
// The live instances but me, with their internal URLs: {id, url, id, url...}, in one round trip.
const PEERS = new LuaScript(
  `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], now - tonumber(ARGV[2]), '+inf')
local out = {}
if #ids == 0 then return out end
local urls = redis.call('HMGET', KEYS[2], unpack(ids))
for i = 1, #ids do
  if ids[i] ~= ARGV[1] and urls[i] then
    out[#out + 1] = ids[i]
    out[#out + 1] = urls[i]
  end
end
return out`,
  2,
);

// KEYS: the generation key. ARGV: a new generation. Returns the generation, made with ARGV[1] if
// there was none: in one step, since Redis may lose its data again between a SET NX and a GET.
const GENERATION = new LuaScript(
  `local current = redis.call('GET', KEYS[1])
if current then return current end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]`,
  1,
);

/** What a beat found, for the mode to write its records back ({@link BeatHooks.beat}). */
export interface Beat {
  /** This instance's presence was found gone in some shard since the last full check: the records it holds there are checked (written back, or let go). */
  all: boolean;
  /** Whether `sessionId` is in a shard whose records this beat checks. */
  checks(sessionId: string): boolean;
  /** Some shard lost its data since this instance last looked (a new generation). */
  lostData: boolean;
  /** Whether `sessionId` is in a shard that lost its data since this instance last looked. */
  lostDataOf(sessionId: string): boolean;
  /** Whether a record of `sessionId` missing now may have gone with Redis' data (not ended on purpose): `'1'` or `'0'`. */
  dataLost(sessionId: string): '1' | '0';
  /** When the beat's first write went through. */
  now: number;
}

/** What this instance knows of one shard (see shards.ts). */
interface ShardState {
  /** The shard's generation this instance last saw: a new one means the shard lost its data. */
  generation: string | undefined;
  /** When this instance found the shard's data lost (a new generation), if it ever did. */
  dataLostAt: number | undefined;
  /** The generation in which this instance's records in the shard were last all written (by a beat): the fence's (see fence.ts). */
  recordsGeneration: string | undefined;
  /** Full checks of the records held in the shard asked for (its presence was found gone), and how many a beat that went through did. */
  reclaimAsked: number;
  reclaimDone: number;
}

/** What the mode does at each beat and heartbeat tick. */
export interface BeatHooks {
  /** Sessions a peer took back from this instance after Redis lost its data (see the forwarding mode's RECLAIM). */
  taken(sessionIds: string[]): void;
  /** After the registry's own writes: the mode writes back or checks what it holds. */
  beat(beat: Beat): Promise<void>;
}

/**
 * This instance in Redis, for both cluster modes: its heartbeat (`instance:<id>` with its internal
 * URL, alive `3 × heartbeatMs` past the last beat, and its score in the instances' sorted set),
 * whether the others beat, whether Redis lost its data (the generation key), and the hop secret
 * the instances share. An outage is no instance's death: back from one, peers get a whole window
 * to beat again before any counts as gone.
 */
export class InstanceRegistry {
  /** An instance counts as gone `3 × heartbeatMs` after its last beat. */
  readonly ownerTimeoutMs: number;
  /** Back from an outage, no peer counts as gone for this long (see {@link isAlive}). */
  private readonly outageWindowMs: number;
  readonly hops: HopSigner;
  private readonly timer: ReturnType<typeof setInterval>;
  private beating: Promise<void> | undefined;
  private hooks: BeatHooks | undefined;
  private readonly liveness = new Map<string, { alive: boolean; at: number }>();
  private peersCache: { at: number; peers: SessionOwner[] } | undefined;
  /** The shards of Redis' data (one on one Redis, one per master on a Redis Cluster), and what this instance knows of each. */
  private readonly shards: Shards;
  private readonly shardStates = new Map<string, ShardState>();
  /** When the last beat that went through (records checked) was sent. */
  private beatSentAt = Date.now();
  /** When the heartbeat timer last fired: a timer (or a request) that finds it two beats old found a pause. */
  tickedAt = Date.now();
  /** The connection to Redis was lost (closed) since it was last ready. */
  private cutOff = false;
  /** When the connection was last ready again after it was lost: peers get a window to beat again (see {@link isAlive}). */
  private backAt: number | undefined;
  /** When a connection that was up was last lost (on a Redis Cluster, any master's). */
  private lostAt: number | undefined;
  /** The shared hop secret, once known; `undefined` while it is still to be read from Redis. */
  private hopSecret: string | undefined;
  private readonly ownHopSecret: boolean;
  private closed = false;
  private readonly unfollow: () => void;

  constructor(
    private readonly client: RedisClient,
    private readonly keys: Keyspace,
    readonly instanceId: string,
    /** `''` in a shared cluster. */
    readonly internalUrl: string,
    readonly heartbeatMs: number,
    hopSecret: string | undefined,
    /** Each heartbeat timer, once its beat is sent, with the time since the last one (a shared cluster looks for a pause there). */
    private readonly onTick: (sinceLastTickMs: number) => void,
  ) {
    this.ownerTimeoutMs = heartbeatMs * 3;
    // On a Redis Cluster a peer learns of a failover its own way: its beat to the master that went
    // silent waits out the command timeout before it is sent again to the promoted replica.
    this.outageWindowMs = this.ownerTimeoutMs + (isCluster(client) ? (commandTimeoutOf(client) ?? 0) : 0);
    this.shards = new Shards(client, keys, instanceId);
    this.hops = new HopSigner(hopSecret);
    this.hopSecret = hopSecret;
    this.ownHopSecret = hopSecret !== undefined;
    this.timer = setInterval(() => this.tick(), heartbeatMs);
    this.timer.unref?.();
    // An instance counts as alive from the moment it can serve: it beats as soon as the
    // connection is up (and again after every reconnect), not a heartbeat later. On a Redis
    // Cluster, each master's connection: a failover of one shard is an outage of its slots.
    this.unfollow = followConnections(client, { ready: this.onReady, lost: this.onClose });
  }

  /** Starts beating, with what the mode does at each beat. */
  start(hooks: BeatHooks): void {
    this.hooks = hooks;
    void this.heartbeat();
  }

  private readonly onReady = (): void => {
    if (this.cutOff) this.backAt = Date.now();
    this.cutOff = false;
    // A beat under way may be caught in the outage (its command to a master that went silent waits
    // out its timeout): one more right after it, through the connection that is up now.
    if (this.beating) this.beatAfter = true;
    void this.heartbeat();
  };

  /** A connection came up while a beat was under way: beat again once it ends. */
  private beatAfter = false;

  private readonly onClose = (): void => {
    this.cutOff = true;
    this.lostAt = Date.now();
  };

  private tick(): void {
    const now = Date.now();
    const sinceLastTick = now - this.tickedAt;
    this.tickedAt = now;
    // On a Redis Cluster a beat waits for every shard: one caught in a master's outage (its command
    // waiting out its timeout) must not let this instance's liveness, on another master, expire,
    // nor its presences in the other shards, which peers read when a failover lost the liveness
    // key (see beatsSomewhere). `XX`: a presence gone stays gone until the beat finds it so (GET),
    // since that is how it finds that its shard lost its data.
    if (this.beating && isCluster(this.client)) {
      this.client.set(...this.livenessArgs()).catch(() => {});
      for (const shard of this.shards.all())
        this.client.set(shard.presenceKey, this.internalUrl, 'PX', this.heartbeatMs * 3, 'XX').catch(() => {});
    }
    void this.heartbeat();
    this.onTick(sinceLastTick);
  }

  /** The command that writes this instance's liveness key on a Redis Cluster (on one Redis, its presence is that). */
  private livenessArgs(): [string, string, 'PX', number] {
    return [this.keys.instance(this.instanceId), this.internalUrl, 'PX', this.heartbeatMs * 3];
  }

  /** One beat now, or the one under way. */
  heartbeat(): Promise<void> {
    if (this.closed || this.beating || !this.hooks) return this.beating ?? Promise.resolve();
    this.beating = this.beat(this.hooks)
      .catch(() => {}) // Redis is down: the next beat tries again; requests meanwhile get 503s.
      .finally(() => {
        this.beating = undefined;
        if (!this.beatAfter) return;
        this.beatAfter = false;
        void this.heartbeat();
      });
    return this.beating;
  }

  private async beat(hooks: BeatHooks): Promise<void> {
    const sentAt = Date.now();
    const shards = this.shards.all();
    // A Redis Cluster whose slots are not read yet: its `ready` beats again.
    if (shards.length === 0) throw new Error('the Redis Cluster has no slots read yet');
    const [presences] = await Promise.all([
      // This instance's presence in each shard, with what it held (gone: its records there may be too).
      Promise.all(shards.map((shard) => this.client.set(shard.presenceKey, this.internalUrl, 'PX', this.heartbeatMs * 3, 'GET'))),
      // On a Redis Cluster its liveness is a key of its own, apart from the shards' presences.
      isCluster(this.client)
        ? this.client.set(this.keys.instance(this.instanceId), this.internalUrl, 'PX', this.heartbeatMs * 3)
        : undefined,
    ]);
    // Once per client (cached), also for an app that never calls ready(): a warning if Redis may evict.
    void checkEvictionPolicy(this.client);
    // Sessions a peer took back from this instance after Redis lost its data (see the forwarding mode's RECLAIM).
    const [, taken] = await Promise.all([
      BEAT_INDEX.run(this.client, [
        this.keys.instances(),
        this.keys.instanceUrls(),
        this.instanceId,
        this.internalUrl,
        this.ownerTimeoutMs,
      ]),
      this.client.spop(this.keys.taken(this.instanceId), 10_000),
    ]);
    hooks.taken(taken);
    const now = Date.now();
    // Our presence in a shard was gone, so our records there may be too (it restarted empty): they
    // are all checked again, at this beat or, if it fails midway, the next.
    const checked = new Map<string, number>();
    for (const [i, shard] of shards.entries()) {
      const state = this.stateOf(shard.tag);
      if (presences[i] === null) state.reclaimAsked++;
      if (state.reclaimDone < state.reclaimAsked) checked.set(shard.tag, state.reclaimAsked);
    }
    const all = checked.size > 0;
    if (!this.ownHopSecret && (all || this.hopSecret === undefined)) await this.shareHopSecret();
    const lost = all ? await this.shardsThatLostData(shards.filter((shard) => checked.has(shard.tag))) : new Set<string>();
    // Back after our presence expired, with the shard's data intact (or at a refresh), a missing
    // owner record was ended or handed off on purpose, not lost with Redis: it is not brought back
    // (see fence.ts). Never written in a known generation yet: any record missing now may have gone with Redis.
    const dataLostIn = (tag: string) => {
      const state = this.stateOf(tag);
      return state.recordsGeneration === undefined || state.generation !== state.recordsGeneration;
    };
    const tagOf = (sessionId: string) => this.shards.of(sessionId).tag;
    await hooks.beat({
      all,
      checks: (sessionId) => checked.has(tagOf(sessionId)),
      lostData: lost.size > 0,
      lostDataOf: (sessionId) => lost.has(tagOf(sessionId)),
      dataLost: (sessionId) => (dataLostIn(tagOf(sessionId)) ? '1' : '0'),
      now,
    });
    for (const [tag, asked] of checked) {
      const state = this.stateOf(tag);
      state.reclaimDone = asked;
      state.recordsGeneration = state.generation;
    }
    this.beatSentAt = sentAt;
  }

  private stateOf(tag: string): ShardState {
    let state = this.shardStates.get(tag);
    if (!state)
      this.shardStates.set(
        tag,
        (state = { generation: undefined, dataLostAt: undefined, recordsGeneration: undefined, reclaimAsked: 0, reclaimDone: 0 }),
      );
    return state;
  }

  /** This instance's presence in `sessionId`'s shard was found gone outside a beat (a claim): the next beat checks its records there, and one more if one is under way. */
  keyLost(sessionId: string): void {
    const state = this.stateOf(this.shards.of(sessionId).tag);
    state.reclaimAsked++;
    // A beat under way may have read its records before Redis lost them: then one more.
    void this.heartbeat().then(() => (state.reclaimDone < state.reclaimAsked ? this.heartbeat() : undefined));
  }

  /** The tag of the shard holding `sessionId` (see shards.ts). */
  shardOf(sessionId: string): string {
    return this.shards.of(sessionId).tag;
  }

  /** The command that writes this instance's presence in `sessionId`'s shard, returning what it held (`null`: it was gone). */
  presenceArgs(sessionId: string): [string, string, 'PX', number, 'GET'] {
    return [this.shards.of(sessionId).presenceKey, this.internalUrl, 'PX', this.heartbeatMs * 3, 'GET'];
  }

  /** Two beats went by without one going through. */
  stale(): boolean {
    return Date.now() - this.beatSentAt >= this.heartbeatMs * 2;
  }

  /** When the last beat that went through was sent. */
  get lastBeatAt(): number {
    return this.beatSentAt;
  }

  /** Beats until one goes through after a gap; rejects if none does. */
  async beatAgain(): Promise<void> {
    // The beat under way may have been sent before the gap: then one more.
    for (let attempt = 0; attempt < 2 && this.stale(); attempt++) await this.heartbeat();
    if (this.stale()) throw new Error('mcp-kit: no heartbeat went through to check which sessions this instance still owns');
  }

  /**
   * The shards (of `shards`, all by default) that lost their data (restarted empty) since this
   * instance last looked, by tag: each one's generation key, without TTL, made by the first
   * instance to find it missing, changes then. A shard this instance never looked at counts as lost.
   */
  async shardsThatLostData(shards: Shard[] = this.shards.all()): Promise<Set<string>> {
    const lost = new Set<string>();
    await Promise.all(
      shards.map(async (shard) => {
        const current = (await GENERATION.run(this.client, [shard.generationKey, randomUUID()])) as string;
        const state = this.stateOf(shard.tag);
        if (state.generation === undefined || current !== state.generation) lost.add(shard.tag);
        if (state.generation !== undefined && current !== state.generation) state.dataLostAt = Date.now();
        state.generation = current;
      }),
    );
    return lost;
  }

  /**
   * Whether `sessionId`'s shard lost its data moments ago: its generation key is missing (nobody
   * has beaten since) or new to this instance, or this instance found it new less than three
   * heartbeats ago. Live instances write their records back at their next beat; until then a
   * session with no record may still be alive.
   */
  async dataJustLost(sessionId: string): Promise<boolean> {
    const shard = this.shards.of(sessionId);
    const state = this.stateOf(shard.tag);
    const current = await this.client.get(shard.generationKey);
    if (current === null || (state.generation !== undefined && current !== state.generation)) return true;
    return state.dataLostAt !== undefined && Date.now() - state.dataLostAt < this.heartbeatMs * 3;
  }

  /** Whether an instance has beaten within its TTL (this one: until it closes); cached for half a heartbeat. */
  instanceAlive(instanceId: string): Promise<boolean> {
    return instanceId === this.instanceId ? Promise.resolve(!this.closed) : this.isAlive(instanceId);
  }

  /** Whether an instance has beaten within its TTL; answers are cached for half a heartbeat. */
  async isAlive(instanceId: string): Promise<boolean> {
    const now = Date.now();
    const cached = this.liveness.get(instanceId);
    if (cached && now - cached.at < this.heartbeatMs / 2) return cached.alive;
    const alive = await this.beatsSomewhere(instanceId);
    // Back from an outage (a failover, a restart): peers cut off with this instance had their keys
    // expire though they live, and beat again once their own connections are back, maybe a little
    // after this one's. Until they had a whole window for it, none counts as gone: a request for
    // its session is forwarded to it, and one that died meanwhile is taken over when the window
    // ends. An outage is no instance's death: after a Sentinel failover, peers must not take over
    // live sessions and answer their running calls with the lost-instance error. On a Redis
    // Cluster an outage may be one master's, while this instance still reads the others: from the
    // moment a connection is lost too, since a peer's beat may be caught in the same outage.
    const since = (at: number | undefined) => (at === undefined ? Infinity : now - at);
    if (!alive && Math.min(since(this.backAt), since(this.lostAt)) < this.outageWindowMs) return true;
    if (this.liveness.size > 1_000) this.liveness.clear();
    this.liveness.set(instanceId, { alive, at: now });
    return alive;
  }

  /**
   * Whether `instanceId` beats: its liveness key is there or, on a Redis Cluster, its presence in
   * some shard is. A key on one master is lost by a failover of that master when it expired while
   * the cluster found the master down (three heartbeats are shorter than cluster-node-timeout) or
   * the promoted replica lagged, and an instance writes it again only once it found the promoted
   * replica itself; its presences on the other masters, written at each beat and each tick, are
   * still there. An instance that stopped beating or left has none anywhere.
   */
  private async beatsSomewhere(instanceId: string): Promise<boolean> {
    const exists = (key: string) => this.client.exists(key).then((n) => n === 1);
    if (!isCluster(this.client)) return exists(this.keys.instance(instanceId));
    // One key per master, each asked on its own (no command spans slots). A master that does not
    // answer (failing over, silent) gives no verdict; the others do, unless none answers.
    const keys = [this.keys.instance(instanceId), ...this.shards.all().map((shard) => this.keys.presence(shard.tag, instanceId))];
    const [liveness] = await Promise.allSettled([exists(keys[0]!)]);
    if (liveness.status === 'fulfilled' && liveness.value) return true;
    const answers = [liveness, ...(await Promise.allSettled(keys.slice(1).map(exists)))];
    if (answers.some((a) => a.status === 'fulfilled' && a.value)) return true;
    if (liveness.status === 'rejected' && answers.every((a) => a.status === 'rejected')) throw liveness.reason;
    return false;
  }

  /**
   * The other instances that beat, with their internal URLs: one round trip on the instances'
   * sorted set (never a scan of the keyspace, which costs thousands of round trips at 10,000
   * sessions, during a deploy), and kept for half a heartbeat.
   */
  async peers(): Promise<SessionOwner[]> {
    const now = Date.now();
    if (this.peersCache && now - this.peersCache.at < this.heartbeatMs / 2) return this.peersCache.peers;
    const flat = (await PEERS.run(this.client, [
      this.keys.instances(),
      this.keys.instanceUrls(),
      this.instanceId,
      this.ownerTimeoutMs,
    ])) as string[];
    const peers: SessionOwner[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2)
      peers.push({ instanceId: flat[i]!, self: false, principal: undefined, address: flat[i + 1]! });
    this.peersCache = { at: now, peers };
    return peers;
  }

  /** Reads (or, first, makes) the hop secret all instances share; after Redis restarted empty, proposes the one it had. */
  private async shareHopSecret(): Promise<void> {
    this.hopSecret = await sharedHopSecret(this.client, this.keys.hopSecret(), this.hopSecret);
    this.hops.setSecret(this.hopSecret);
  }

  /** Stops beating (after the one under way) and removes this instance's key and index entry. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    this.unfollow();
    this.shards.close();
    await this.beating;
  }

  /** After the mode let go of what it held: this instance is gone for the others at once. */
  async leave(): Promise<void> {
    await this.client.del(this.keys.instance(this.instanceId)).catch(() => {});
    if (isCluster(this.client)) await Promise.all(this.shards.all().map((shard) => this.client.del(shard.presenceKey).catch(() => {})));
    await this.client.zrem(this.keys.instances(), this.instanceId).catch(() => {});
    await this.client.hdel(this.keys.instanceUrls(), this.instanceId).catch(() => {});
  }

  /**
   * Whether `sessionId`'s shard lost its data since this instance's records there were last all
   * written (its generation key is gone or another): a record missing now is then only not written back yet.
   */
  async dataLostSinceRecords(sessionId: string): Promise<boolean> {
    const shard = this.shards.of(sessionId);
    const current = await this.client.get(shard.generationKey);
    const { recordsGeneration } = this.stateOf(shard.tag);
    return recordsGeneration === undefined || current !== recordsGeneration;
  }

  get isClosed(): boolean {
    return this.closed;
  }
}
