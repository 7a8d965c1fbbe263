import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { SessionOwner } from '@mcp-kit/core';
import { LuaScript } from '../client.js';
import { checkEvictionPolicy } from '../eviction.js';
import { HopSigner, sharedHopSecret } from '../hop.js';
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
  /** This instance's key was found gone since the last full check: every record it holds is checked (written back, or let go). */
  all: boolean;
  /** Redis lost its data since this instance last looked (a new generation). */
  lostData: boolean;
  /** Whether a record missing now may have gone with Redis' data (not ended on purpose): `'1'` or `'0'`. */
  dataLost: '1' | '0';
  /** When the beat's first write went through. */
  now: number;
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
  readonly hops: HopSigner;
  private readonly timer: ReturnType<typeof setInterval>;
  private beating: Promise<void> | undefined;
  private hooks: BeatHooks | undefined;
  private readonly liveness = new Map<string, { alive: boolean; at: number }>();
  private peersCache: { at: number; peers: SessionOwner[] } | undefined;
  /**
   * Full checks of every held record asked for (our instance key was found gone, by a beat or a
   * claim), and how many of them a beat that went through did: the next beat does them while fewer.
   */
  private reclaimAsked = 0;
  private reclaimDone = 0;
  /** When the last beat that went through (records checked) was sent. */
  private beatSentAt = Date.now();
  /** When the heartbeat timer last fired: a timer (or a request) that finds it two beats old found a pause. */
  tickedAt = Date.now();
  /** Redis' data generation this instance last saw (`<prefix>generation`): a new one means Redis lost its data. */
  private generation: string | undefined;
  /** When this instance found Redis' data lost (a new generation), if it ever did. */
  private dataLostAt: number | undefined;
  /** The generation in which this instance's records were last all written (by a beat): the fence's (see fence.ts). */
  private recordsGeneration: string | undefined;
  /** The connection to Redis was lost (closed) since it was last ready. */
  private cutOff = false;
  /** When the connection was last ready again after it was lost: peers get a window to beat again (see {@link isAlive}). */
  private backAt: number | undefined;
  /** The shared hop secret, once known; `undefined` while it is still to be read from Redis. */
  private hopSecret: string | undefined;
  private readonly ownHopSecret: boolean;
  private closed = false;

  constructor(
    private readonly client: Redis,
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
    this.hops = new HopSigner(hopSecret);
    this.hopSecret = hopSecret;
    this.ownHopSecret = hopSecret !== undefined;
    this.timer = setInterval(() => this.tick(), heartbeatMs);
    this.timer.unref?.();
    // An instance counts as alive from the moment it can serve: it beats as soon as the
    // connection is up (and again after every reconnect), not a heartbeat later.
    client.on('ready', this.onReady);
    client.on('close', this.onClose);
  }

  /** Starts beating, with what the mode does at each beat. */
  start(hooks: BeatHooks): void {
    this.hooks = hooks;
    void this.heartbeat();
  }

  private readonly onReady = (): void => {
    if (this.cutOff) this.backAt = Date.now();
    this.cutOff = false;
    void this.heartbeat();
  };

  private readonly onClose = (): void => void (this.cutOff = true);

  private tick(): void {
    const now = Date.now();
    const sinceLastTick = now - this.tickedAt;
    this.tickedAt = now;
    void this.heartbeat();
    this.onTick(sinceLastTick);
  }

  /** One beat now, or the one under way. */
  heartbeat(): Promise<void> {
    if (this.closed || this.beating || !this.hooks) return this.beating ?? Promise.resolve();
    this.beating = this.beat(this.hooks)
      .catch(() => {}) // Redis is down: the next beat tries again; requests meanwhile get 503s.
      .finally(() => {
        this.beating = undefined;
      });
    return this.beating;
  }

  private async beat(hooks: BeatHooks): Promise<void> {
    const sentAt = Date.now();
    const previous = await this.client.set(this.keys.instance(this.instanceId), this.internalUrl, 'PX', this.heartbeatMs * 3, 'GET');
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
    // Our key was gone, so our records may be too (Redis restarted): write them all again, at this
    // beat or, if it fails midway, the next.
    if (previous === null) this.reclaimAsked++;
    const asked = this.reclaimAsked;
    const all = this.reclaimDone < asked;
    if (!this.ownHopSecret && (all || this.hopSecret === undefined)) await this.shareHopSecret();
    const lostData = all && (await this.redisLostData());
    // Back after our key expired, with Redis' data intact (or at a refresh), a missing owner record
    // was ended or handed off on purpose, not lost with Redis: it is not brought back (see fence.ts).
    // Never written in a known generation yet: any record missing now may have gone with Redis.
    const dataLost = this.recordsGeneration === undefined || this.generation !== this.recordsGeneration ? '1' : '0';
    await hooks.beat({ all, lostData, dataLost, now });
    if (all) this.reclaimDone = asked;
    this.beatSentAt = sentAt;
    if (all) this.recordsGeneration = this.generation;
  }

  /** This instance's key was found gone outside a beat (a claim): the next beat checks every record, and one more if one is under way. */
  keyLost(): void {
    this.reclaimAsked++;
    // A beat under way may have read its records before Redis lost them: then one more.
    void this.heartbeat().then(() => (this.reclaimDone < this.reclaimAsked ? this.heartbeat() : undefined));
  }

  /** The command that writes this instance's key, returning what it held (`null`: it was gone). */
  instanceKeyArgs(): [string, string, 'PX', number, 'GET'] {
    return [this.keys.instance(this.instanceId), this.internalUrl, 'PX', this.heartbeatMs * 3, 'GET'];
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
   * Whether Redis lost its data (restarted empty) since this instance last looked: a generation
   * key without TTL, made by the first instance to find it missing, changes then.
   */
  async redisLostData(): Promise<boolean> {
    const current = (await GENERATION.run(this.client, [this.keys.generation(), randomUUID()])) as string;
    const lost = this.generation === undefined || current !== this.generation;
    if (lost && this.generation !== undefined) this.dataLostAt = Date.now();
    this.generation = current;
    return lost;
  }

  /**
   * Whether Redis lost its data moments ago: its generation key is missing (nobody has beaten
   * since) or new to this instance, or this instance found it new less than three heartbeats ago.
   * Live instances write their records back at their next beat; until then a session with no
   * record may still be alive.
   */
  async dataJustLost(): Promise<boolean> {
    const current = await this.client.get(this.keys.generation());
    if (current === null || (this.generation !== undefined && current !== this.generation)) return true;
    return this.dataLostAt !== undefined && Date.now() - this.dataLostAt < this.heartbeatMs * 3;
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
    const alive = (await this.client.exists(this.keys.instance(instanceId))) === 1;
    // Back from an outage (a failover, a restart): peers cut off with this instance had their keys
    // expire though they live, and beat again once their own connections are back, maybe a little
    // after this one's. Until they had a whole window for it, none counts as gone: a request for
    // its session is forwarded to it, and one that died meanwhile is taken over when the window
    // ends. An outage is no instance's death: after a Sentinel failover, peers must not take over
    // live sessions and answer their running calls with the lost-instance error.
    if (!alive && this.backAt !== undefined && now - this.backAt < this.ownerTimeoutMs) return true;
    if (this.liveness.size > 1_000) this.liveness.clear();
    this.liveness.set(instanceId, { alive, at: now });
    return alive;
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
    this.client.off('ready', this.onReady);
    this.client.off('close', this.onClose);
    await this.beating;
  }

  /** After the mode let go of what it held: this instance is gone for the others at once. */
  async leave(): Promise<void> {
    await this.client.del(this.keys.instance(this.instanceId)).catch(() => {});
    await this.client.zrem(this.keys.instances(), this.instanceId).catch(() => {});
    await this.client.hdel(this.keys.instanceUrls(), this.instanceId).catch(() => {});
  }

  /**
   * Whether Redis lost its data since this instance's records were last all written (the
   * generation key is gone or another): a record missing now is then only not written back yet.
   */
  async dataLostSinceRecords(): Promise<boolean> {
    const current = await this.client.get(this.keys.generation());
    return this.recordsGeneration === undefined || current !== this.recordsGeneration;
  }

  get isClosed(): boolean {
    return this.closed;
  }
}
