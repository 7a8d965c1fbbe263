import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { ClusterMessage, CoreResponder, ForwardedRequest, RestoreRecord, SessionCluster, SessionOwner, TakeOver } from '@mcp-kit/core';
import { positiveInt } from '@mcp-kit/core/internal';
import { createRedisClient, duplicateClient, LuaScript, whenReady } from './client.js';
import { checkEvictionPolicy } from './eviction.js';
import { MINE_LUA } from './fence.js';
import { BUS_MAX_ENTRIES, BUS_POST_LUA, BUS_RETENTION_MS, SharedBus } from './bus.js';
import { HttpForwarder } from './forward.js';
import { HopSigner, sharedHopSecret } from './hop.js';
import { clusterMode, type ClusterMode } from './mode.js';
import { SessionQuota } from './quota.js';

export interface RedisSessionClusterOptions {
  /** Redis to connect to. Give this or `client`. */
  url?: string;
  /** An ioredis client to use instead of `url`; the cluster does not close it. */
  client?: Redis;
  /**
   * How the instances share sessions. `'forward'`: each session has an owner, the instance that
   * answered its `initialize`; the requests other instances get for it are forwarded there over
   * HTTP, to its `internalUrl`. `'shared'` where instances cannot reach each other (serverless:
   * Vercel, Lambda, Cloud Run): any instance serves any request with its own copy of the session,
   * restored from the record in Redis; resumes follow the shared store; the client's answers to
   * the server's requests and its cancels reach the instance running the call through Redis
   * pub/sub. Default: `'forward'` when `internalUrl` is given; with neither, `'shared'` and a
   * deprecation warning (a later version will require one of them).
   */
  mode?: ClusterMode;
  /**
   * Where the other instances reach this instance's MCP endpoint, e.g.
   * `http://10.0.3.7:3000/mcp` (a pod IP, not the public URL: forwarded requests must reach this
   * very process). Required in forwarding mode; refused in shared mode. Checked at startup: a
   * `TypeError` names it when it is `undefined` (an unset environment variable), empty, not an
   * absolute http(s) URL, or its host is empty, `undefined` or `null`
   * (`http://${process.env.POD_IP}:3000/mcp` with `POD_IP` unset).
   */
  internalUrl?: string;
  /** Prefix of every key. Default `'mcp-kit:'`. */
  keyPrefix?: string;
  /** This instance's id. Default: a random UUID (a restarted process is a new instance). */
  instanceId?: string;
  /**
   * How often this instance tells Redis it is alive. It counts as gone `3 × heartbeatMs` after the
   * last beat; its sessions then get 404 on other instances. Default `2_000`.
   */
  heartbeatMs?: number;
  /**
   * Owner records expire this long after they were last refreshed; the heartbeat refreshes those
   * of live sessions at half this age, so only records of crashed instances expire. Default 24 h.
   */
  ownerTtlMs?: number;
  /** Connecting to an owner for a forwarded request may take this long. Default `2_000`. */
  connectTimeoutMs?: number;
  /**
   * An owner that has not started answering a forwarded request this long after it was sent (on a
   * new or a reused keep-alive connection) is checked with a request on a new connection; if that
   * gets no answer within this long either, the owner counts as unreachable (frozen, or cut off
   * by a silent partition). A `POST` then gets `502` at once (the owner may have received it, so
   * it is not run here too); a `GET` or `DELETE` waits for the owner to be declared gone and is
   * served from the restored session. An owner that answers the check is busy, not gone, and is
   * waited for. Default `3_000` (a frozen owner is given up after at most twice this).
   */
  responseTimeoutMs?: number;
  /** Relayed streams are cut past this many unread bytes (the client resumes). Default 4 MiB. */
  maxBufferedBytes?: number;
  /** Command timeout of the client created from `url`, in ms. Default `2_000`. */
  commandTimeoutMs?: number;
  /**
   * The secret with which instances sign the requests they forward or hand over to each other
   * (HMAC-SHA256 in `mcp-kit-forwarded-by`), so that a client cannot pass for an instance.
   * Default: a random one made by the first instance and kept in Redis (`<prefix>hop-secret`);
   * give your own (at least 16 characters, the same on every instance) to keep it out of Redis.
   */
  hopSecret?: string;
  /**
   * Most sessions one principal (or, without auth, one client address: the handler's `clientKey`)
   * opens across the deployment within the handler's `sessionIdleTtlMs`; past it, its `initialize`
   * gets 429 with `Retry-After`, until one of them is that old or deleted. An instance's own
   * `maxSessionsPerPrincipal` only bounds what it holds in memory (a session it lets go of lives on
   * in Redis): this bounds what one client keeps in Redis. Default: off.
   */
  maxSessionsPerPrincipal?: number;
}

// KEYS: owner record, restore record. ARGV: me, my URL, principal ('' = none), instance key prefix, owner TTL.
// Returns {0} no such session, {1} another principal's, {2, restore, owner record} taken (or already
// ours), {3, owner} a live owner. The record it writes carries `e`, Redis' time of the take-over, which
// tells a later owner from an earlier one if both write their records back after Redis lost its data (see RECLAIM).
const TAKE_OVER = new LuaScript(
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

// KEYS: the instances' sorted set, this instance's taken set. ARGV: this instance's id, how long
// after its last beat an instance counts as gone.
// Scores are Redis' own clock, so instances with skewed clocks agree; the long gone are dropped.
// Returns (and empties) the taken set: sessions a peer took back from this instance (see RECLAIM).
const BEAT_INDEX = new LuaScript(
  `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 10 * tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], 10 * tonumber(ARGV[2]))
local taken = redis.call('SMEMBERS', KEYS[2])
if #taken > 0 then redis.call('DEL', KEYS[2]) end
return taken`,
  2,
);

// KEYS: the instances' sorted set. ARGV: me, the window, the instance key prefix.
// The live instances but me, with their internal URLs: {id, url, id, url...}, in one round trip.
const PEERS = new LuaScript(
  `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], now - tonumber(ARGV[2]), '+inf')
local out = {}
for i = 1, #ids do
  if ids[i] ~= ARGV[1] then
    local url = redis.call('GET', ARGV[3] .. ids[i])
    if url then
      out[#out + 1] = ids[i]
      out[#out + 1] = url
    end
  end
end
return out`,
  1,
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

// KEYS: none (the keys are built from ARGV[3] and ARGV[5]). ARGV: me, ttl, owner key prefix,
// whether Redis lost its data since these records were last written ('1') or not ('0'), the
// prefix of the instances' taken sets, then (session id, record) pairs.
// Writes back each owner record that still names this instance. While Redis kept its data, one
// that names another instance was taken over while this one was away (a pause past its heartbeat
// window, a partition), and one that is gone was ended or handed off (issue 27, item 10): it is
// returned, and this instance lets the session go. After Redis lost its data, one that is gone is
// written back (its owner is this instance, which had not beaten since); and of two instances that
// both hold a session (one took it over while the other was away, then the data went) the one that
// took it last keeps it, whichever beats first: `e`, Redis' time of the take-over (none: the
// instance created the session), decides, and the instance whose record is replaced finds the
// session in its taken set at its next beat.
const RECLAIM = new LuaScript(
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

// KEYS: restore record. ARGV: the record (JSON), its principal ('' = none), its ttl, whether a missing
// record may be made ('1': the instance that created the session, which knows its principal).
// A shared cluster has no owner: the principal of a saved record is kept, never replaced.
const SAVE_SHARED = new LuaScript(
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

// KEYS: owner record, restore record, generation key. ARGV: me, the record, its ttl, the
// generation this instance's records were written in.
// Only while the session is this instance's (see fence.ts): a stale owner neither overwrites what
// the session's new owner keeps to restore it nor brings back a session that was ended.
const SAVE_RECORD = new LuaScript(
  `${MINE_LUA}if not mine(KEYS[1], KEYS[3], ARGV[1], ARGV[4]) then return 0 end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return 1`,
  3,
);

// KEYS: owner record, restore record ('' = keep it), generation key. ARGV: me, the generation this
// instance's records were written in.
// Lets go of a session only while it is this instance's: a stale owner deletes nothing of the new
// one's. With no owner record while Redis kept its data, a restore record is the one an instance
// that handed the session off kept for the next (issue 27, item 10): not this instance's to delete.
// With neither, the session ended already: 1, its events may go.
const RELEASE = new LuaScript(
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
// close(): deletes the owner records that still name this instance; one a peer took over stays
// the peer's (issue 27, item 10).
const RELEASE_OWNED = new LuaScript(
  `for i = 3, #ARGV do
  local key = ARGV[2] .. ARGV[i]
  local raw = redis.call('GET', key)
  if raw and cjson.decode(raw).i == ARGV[1] then redis.call('DEL', key) end
end
return 1`,
  0,
);

// KEYS: restore record, owner record, the inbox of all instances. ARGV: its channel, the 'ended'
// message, the bus' retention and max entries.
// Shared: the client's DELETE. The record goes and every instance is told in one step, so a copy
// that missed the message finds the session gone from Redis, and the message in its inbox (pub/sub only wakes).
const END_SHARED = new LuaScript(
  `${BUS_POST_LUA}redis.call('DEL', KEYS[1], KEYS[2])
post(KEYS[3], ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]))
return 1`,
  3,
);

// KEYS: restore record. ARGV: the record as last read, the record to save instead, its ttl.
// Shared: one change (a subscription added or removed, a log level) applied to the record as it is
// in Redis, never to a copy's stale view of it: a compare-and-set, so two copies saving at once both
// keep their change. Returns 1 once saved, 0 when the record is gone (the session was deleted: not
// brought back), or the record as it is now, for the change to be applied to it again.
const UPDATE_SHARED = new LuaScript(
  `local current = redis.call('GET', KEYS[1])
if not current then return 0 end
if current ~= ARGV[1] then return current end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1`,
  1,
);

/** Applies the client's `change` (one of the recorded methods) to a saved record, in place. */
function applyChange(record: RestoreRecord, change: { method: string; params?: Record<string, unknown> }): void {
  const uri = change.params?.uri;
  if (change.method === 'logging/setLevel') record.loggingLevel = change.params;
  else if (typeof uri !== 'string') return;
  else if (change.method === 'resources/subscribe') {
    // By URI, in the order they came (as `SessionRecord` keeps them): a repeated subscribe replaces its params.
    const subscriptions = record.subscriptions ?? [];
    const at = subscriptions.findIndex((s) => s.uri === uri);
    if (at >= 0) subscriptions[at] = change.params!;
    else subscriptions.push(change.params!);
    record.subscriptions = subscriptions;
  } else if (change.method === 'resources/unsubscribe' && record.subscriptions) {
    record.subscriptions = record.subscriptions.filter((s) => s.uri !== uri);
    if (record.subscriptions.length === 0) delete record.subscriptions;
  }
}

interface OwnerRecord {
  /** instance id */
  i: string;
  /** internal URL */
  u: string;
  /** principal */
  p: string | null;
}

/**
 * Session ownership in Redis, for `createMcpHandler({ cluster })`: `<prefix>owner:<sessionId>`
 * names the instance that holds a session and its internal URL; `<prefix>instance:<id>` lives
 * `3 × heartbeatMs` past the instance's last heartbeat. A session whose instance key is gone has no
 * owner (404). Requests for another instance's session are relayed over HTTP to its internal URL.
 *
 * If the instance key was missing at a heartbeat (Redis restarted, or this instance was cut off
 * past its TTL), every live session's owner record is written again, so service recovers by itself.
 */
export class RedisSessionCluster implements SessionCluster {
  readonly instanceId: string;
  /** `''` in a shared cluster. */
  readonly internalUrl: string;
  /** `mode: 'shared'`: no instance owns a session, any instance serves it (see {@link RedisSessionClusterOptions.mode}). */
  readonly shared: boolean;
  readonly ownerCheckMs: number;
  /** An instance counts as gone `3 × heartbeatMs` after its last beat. */
  readonly ownerTimeoutMs: number;
  readonly client: Redis;
  private readonly prefix: string;
  private readonly heartbeatMs: number;
  private readonly ownerTtlMs: number;
  private readonly ownsClient: boolean;
  private readonly forwarder: HttpForwarder;
  private readonly hops: HopSigner;
  /** The shared hop secret, once known; `undefined` while it is still to be read from Redis. */
  private hopSecret: string | undefined;
  private readonly ownHopSecret: boolean;
  private readonly owned = new Map<string, { record: string; refreshedAt: number }>();
  private peersCache: { at: number; peers: SessionOwner[] } | undefined;
  /** Sessions taken over by another instance while this one was away, until the engine lets them go. */
  private readonly lost = new Set<string>();
  /** Sessions their clients deleted here whose release Redis has not taken yet (the engine tries again, and `close` once more). */
  private readonly releasing = new Set<string>();
  private lostListener: ((sessionId: string) => void) | undefined;
  private readonly liveness = new Map<string, { alive: boolean; at: number }>();
  private readonly timer: ReturnType<typeof setInterval>;
  private beating: Promise<void> | undefined;
  /**
   * Full checks of every owner record asked for (our instance key was found gone, by a beat or a
   * claim), and how many of them a beat that went through did: the next beat does them while fewer.
   */
  private reclaimAsked = 0;
  private reclaimDone = 0;
  /** When the last beat that went through (owner records checked) was sent. */
  private beatSentAt = Date.now();
  /** Redis' data generation this instance last saw (`<prefix>generation`): a new one means Redis lost its data. */
  private generation: string | undefined;
  /** When this instance found Redis' data lost (a new generation), if it ever did. */
  private dataLostAt: number | undefined;
  /** The connection to Redis was lost (closed) since it was last ready. */
  private cutOff = false;
  /** When the connection was last ready again after it was lost: peers get a window to beat again (see {@link isAlive}). */
  private backAt: number | undefined;
  /** The generation in which this instance's owner records were last all written (by a beat): the fence's (see fence.ts). */
  private recordsGeneration: string | undefined;
  private closed = false;
  /** Shared: the principals of sessions created here whose record is not saved yet. */
  private readonly created = new Map<string, string | null>();
  /**
   * Shared: the records of the sessions this instance holds a copy of, as saved, and their TTL:
   * written back if Redis loses its data (nobody owns them, so nobody else would).
   */
  private readonly held = new Map<string, { saved: string; ttlMs: number }>();
  /** Shared: what instances send each other, kept in Redis until read (see {@link SharedBus}). */
  private readonly bus: SharedBus;
  /**
   * Shared: since the held copies were last checked, the subscriber connection dropped or this
   * process was frozen, so a post may have been missed live (an `ended` among them).
   */
  private busGap = false;
  private rechecking: Promise<void> | undefined;
  /** Shared: when the last check of the held copies that went through started. */
  private recheckedAt = 0;
  /** When the heartbeat timer last fired: a timer (or a request) that finds it two beats old found a pause. */
  private tickedAt = Date.now();
  /** Shared: a check of the held copies before a request is served waits at most this long (then 503). */
  private readonly checkTimeoutMs: number;
  /** With `maxSessionsPerPrincipal`: the sessions each principal opened lately. */
  private readonly quota: SessionQuota | undefined;

  constructor(options: RedisSessionClusterOptions & { /** @internal */ ownsClient?: boolean }) {
    if (!options.client && !options.url)
      throw new TypeError('RedisSessionCluster: give `url` (e.g. process.env.REDIS_URL) or an ioredis `client`');
    const { mode, internalUrl } = clusterMode(options, 'RedisSessionCluster');
    // Checked before anything connects.
    const perPrincipal =
      options.maxSessionsPerPrincipal === undefined
        ? undefined
        : positiveInt(options.maxSessionsPerPrincipal, 'maxSessionsPerPrincipal', 'RedisSessionCluster');
    this.shared = mode === 'shared';
    this.internalUrl = internalUrl;
    this.client =
      options.client ??
      createRedisClient(options.url as string, { commandTimeoutMs: options.commandTimeoutMs, connectionName: 'mcp-kit-cluster' });
    this.ownsClient = options.ownsClient ?? !options.client;
    this.prefix = options.keyPrefix ?? 'mcp-kit:';
    this.instanceId = options.instanceId ?? randomUUID();
    this.heartbeatMs = positiveInt(options.heartbeatMs ?? 2_000, 'heartbeatMs', 'RedisSessionCluster');
    this.ownerTtlMs = positiveInt(options.ownerTtlMs ?? 24 * 60 * 60_000, 'ownerTtlMs', 'RedisSessionCluster');
    this.ownerCheckMs = Math.max(this.heartbeatMs, 1_000);
    this.ownerTimeoutMs = this.heartbeatMs * 3;
    this.hops = new HopSigner(options.hopSecret);
    this.hopSecret = options.hopSecret;
    this.ownHopSecret = options.hopSecret !== undefined;
    this.forwarder = new HttpForwarder({
      instanceId: this.instanceId,
      sign: (request) => this.hops.sign(this.instanceId, request),
      connectTimeoutMs: options.connectTimeoutMs,
      responseTimeoutMs: positiveInt(options.responseTimeoutMs ?? 3_000, 'responseTimeoutMs', 'RedisSessionCluster'),
      maxBufferedBytes: options.maxBufferedBytes,
    });
    this.checkTimeoutMs = options.commandTimeoutMs ?? 2_000;
    if (perPrincipal !== undefined) this.quota = new SessionQuota(this.client, this.prefix, perPrincipal);
    this.bus = new SharedBus({
      client: this.client,
      prefix: this.prefix,
      instanceId: this.instanceId,
      pingTimeoutMs: Math.max(this.heartbeatMs * 2, 1_000),
      onGap: () => (this.busGap = true),
    });
    this.timer = setInterval(() => this.tick(), this.heartbeatMs);
    this.timer.unref?.();
    // An instance counts as alive from the moment it can serve: it beats as soon as the
    // connection is up (and again after every reconnect), not a heartbeat later.
    this.client.on('ready', this.onReady);
    this.client.on('close', this.onClose);
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
    // Frozen (SIGSTOP, a serverless freeze) or starved past two beats: the bus may have lost what
    // it carried meanwhile (a half-open connection), so the held copies are checked again.
    const frozen = this.shared && now - this.tickedAt >= this.heartbeatMs * 2;
    this.tickedAt = now;
    void this.heartbeat();
    if (!this.shared) return;
    // Started now rather than at the next request, which waits for it (a call waiting for an
    // answer posted meanwhile gets it without one).
    if (frozen) {
      this.busGap = true;
      this.recheckHeld().catch(() => {}); // the next request checks again
    }
    this.bus.tick();
  }

  /** Resolves once Redis answers, this instance's first heartbeat is written and Redis' eviction policy is checked. */
  async ready(timeoutMs?: number): Promise<void> {
    await whenReady(this.client, timeoutMs);
    await this.heartbeat();
    await checkEvictionPolicy(this.client);
  }

  async claim(sessionId: string, principal: string | undefined): Promise<void> {
    if (this.shared) {
      // Nothing to own: the record, saved before the handshake's answer goes out, is the session.
      if (this.created.size >= 10_000) this.created.delete(this.created.keys().next().value!);
      this.created.set(sessionId, principal ?? null);
      return;
    }
    const record = JSON.stringify({ i: this.instanceId, u: this.internalUrl, p: principal ?? null } satisfies OwnerRecord);
    const results = await this.client
      .pipeline()
      .set(this.instanceKey(this.instanceId), this.internalUrl, 'PX', this.heartbeatMs * 3, 'GET')
      .set(this.ownerKey(sessionId), record, 'PX', this.ownerTtlMs)
      .exec();
    for (const [error] of results ?? []) if (error) throw error;
    const lost = results?.[0]?.[1] === null && this.owned.size > 0;
    this.owned.set(sessionId, { record, refreshedAt: Date.now() });
    if (lost) {
      this.reclaimAsked++;
      // A beat under way may have read its records before Redis lost them: then one more.
      void this.heartbeat().then(() => (this.reclaimDone < this.reclaimAsked ? this.heartbeat() : undefined));
    }
  }

  /**
   * `false` when another instance owns the session now: its record and events are not this
   * instance's to delete. Rejects when Redis did not take it; the engine calls it again then
   * (issue 27, item 3), and it goes on where it stopped.
   */
  async release(sessionId: string): Promise<boolean> {
    if (this.shared) {
      // Called for the client's DELETE only: the session ends everywhere.
      this.created.delete(sessionId);
      this.held.delete(sessionId);
      this.remember(this.releasing, sessionId);
      const ended = this.bus.envelope({ kind: 'ended', sessionId });
      await END_SHARED.run(this.client, [
        this.restoreKey(sessionId),
        this.ownerKey(sessionId),
        this.bus.inboxKey('*'),
        this.bus.channel('*'),
        ended,
        BUS_RETENTION_MS,
        BUS_MAX_ENTRIES,
      ]);
      this.releasing.delete(sessionId);
      return true;
    }
    // Out of `owned` at once, so no beat writes its owner record back, but still this instance's to release.
    if (this.owned.delete(sessionId)) this.remember(this.releasing, sessionId);
    else if (!this.releasing.has(sessionId)) return !this.lost.delete(sessionId);
    const keys = [this.ownerKey(sessionId), this.restoreKey(sessionId), this.generationKey()];
    const released = (await RELEASE.run(this.client, [...keys, this.instanceId, this.fenceGeneration])) === 1;
    this.releasing.delete(sessionId);
    return released;
  }

  /** Adds `sessionId` to a set that keeps the 10,000 latest. */
  private remember(set: Set<string>, sessionId: string): void {
    set.add(sessionId);
    if (set.size > 10_000) set.delete(set.values().next().value!);
  }

  /** Keeps what restores the session elsewhere beside its owner record (`<prefix>restore:<id>`), for `ttlMs`. */
  async saveRecord(
    sessionId: string,
    record: RestoreRecord,
    ttlMs: number,
    change?: { method: string; params?: Record<string, unknown> },
  ): Promise<void> {
    if (this.shared) {
      const mine = this.created.has(sessionId);
      // Several copies may change the record at once: each applies its own change to it in Redis.
      if (change && !mine) return this.updateShared(sessionId, change, ttlMs);
      const principal = this.created.get(sessionId) ?? '';
      const saved = await SAVE_SHARED.run(this.client, [
        this.restoreKey(sessionId),
        JSON.stringify(record),
        principal,
        ttlMs,
        mine ? '1' : '0',
      ]);
      this.created.delete(sessionId);
      if (typeof saved === 'string') this.held.set(sessionId, { saved, ttlMs });
      return;
    }
    const owned = this.owned.get(sessionId);
    const principal = owned ? (JSON.parse(owned.record) as OwnerRecord).p : null;
    const saved = JSON.stringify({ p: principal, r: record });
    const keys = [this.ownerKey(sessionId), this.restoreKey(sessionId), this.generationKey()];
    await SAVE_RECORD.run(this.client, [...keys, this.instanceId, saved, ttlMs, this.fenceGeneration]);
  }

  /**
   * Shared: applies the client's `change` to the record as it is in Redis (not to this copy's view
   * of it, which may lack what another copy changed a moment ago), with a compare-and-set that is
   * tried again on the record that won. A record that is gone stays gone (its session was deleted).
   */
  private async updateShared(
    sessionId: string,
    change: { method: string; params?: Record<string, unknown> },
    ttlMs: number,
  ): Promise<void> {
    const key = this.restoreKey(sessionId);
    let current: unknown = this.held.get(sessionId)?.saved ?? (await this.client.get(key));
    for (let attempt = 0; attempt < 50; attempt++) {
      if (typeof current !== 'string') return;
      const saved = JSON.parse(current) as { p: string | null; r: RestoreRecord };
      applyChange(saved.r, change);
      const next = JSON.stringify(saved);
      const reply = await UPDATE_SHARED.run(this.client, [key, current, next, ttlMs]);
      if (reply === 1) {
        this.held.set(sessionId, { saved: next, ttlMs });
        return;
      }
      current = reply;
    }
    throw new Error(`the record of session ${sessionId} kept changing under this update`);
  }

  /** With `maxSessionsPerPrincipal`: counts a new session toward its holder's quota (see {@link SessionQuota}). */
  async admitSession(holder: string, sessionId: string, windowMs: number): Promise<number> {
    return this.quota ? this.quota.admit(holder, sessionId, windowMs) : 0;
  }

  async releaseAdmission(holder: string, sessionId: string): Promise<void> {
    await this.quota?.release(holder, sessionId);
  }

  async keepRecords(sessionIds: string[], ttlMs: number): Promise<void> {
    for (const id of sessionIds) {
      const held = this.held.get(id);
      if (held) held.ttlMs = ttlMs;
    }
    const pipeline = this.client.pipeline();
    for (const id of sessionIds) pipeline.pexpire(this.restoreKey(id), ttlMs);
    const results = await pipeline.exec();
    for (const [error] of results ?? []) if (error) throw error;
  }

  /**
   * Takes over a session whose owner is gone or handed it off, atomically (one Lua script), so of
   * several instances racing for it one wins and the others are told the winner.
   */
  async takeOver(sessionId: string, principal: string | undefined): Promise<TakeOver | undefined> {
    if (this.shared) return this.copy(sessionId, principal);
    // Redis lost its data moments ago: the session may live on an instance that has not written its
    // owner record back yet, though a restore record it saved since is there; taking the session
    // would make a second owner (issue 27, item 10). A 503 its client retries, never a 404.
    if (await this.dataJustLost())
      throw new Error('Redis lost its data moments ago: the session may live on an instance that has not written its records back yet');
    const reply = (await TAKE_OVER.run(this.client, [
      this.ownerKey(sessionId),
      this.restoreKey(sessionId),
      this.instanceId,
      this.internalUrl,
      principal ?? '',
      this.instanceKey(''),
      this.ownerTtlMs,
    ])) as [number, string?, string?];
    if (reply[0] === 0) return undefined;
    if (reply[0] === 1) return { forbidden: true };
    if (reply[0] === 3) {
      const owner = JSON.parse(reply[1]!) as OwnerRecord;
      return { owner: { instanceId: owner.i, self: false, principal: owner.p ?? undefined, address: owner.u } };
    }
    const saved = JSON.parse(reply[1]!) as { p: string | null; r: RestoreRecord };
    const record = reply[2] ?? JSON.stringify({ i: this.instanceId, u: this.internalUrl, p: saved.p } satisfies OwnerRecord);
    this.owned.set(sessionId, { record, refreshedAt: Date.now() });
    return { record: saved.r, principal: saved.p ?? undefined };
  }

  /** Shared: the record of a session, for a copy of it here; nothing is taken from anyone. */
  private async copy(sessionId: string, principal: string | undefined): Promise<TakeOver | undefined> {
    const raw = await this.client.get(this.restoreKey(sessionId));
    if (raw === null) {
      if (await this.dataJustLost())
        throw new Error('Redis lost its data moments ago: the session may live on an instance that has not written its records back yet');
      return undefined;
    }
    const saved = JSON.parse(raw) as { p: string | null; r: RestoreRecord };
    if ((saved.p ?? undefined) !== principal) return { forbidden: true };
    this.held.set(sessionId, { saved: raw, ttlMs: this.held.get(sessionId)?.ttlMs ?? 30 * 60_000 });
    return { record: saved.r, principal: saved.p ?? undefined };
  }

  /**
   * Shared: `message` for the instance `to` (`'*'`: every instance; this one ignores its own),
   * appended to its inbox in Redis (`<prefix>inbox:<to>`, kept {@link BUS_RETENTION_MS}) and
   * published on `<prefix>bus:<to>` to wake it. Resolves once stored: an instance that is not
   * connected now reads it when it is back (see {@link SharedBus}).
   */
  post(to: string, message: ClusterMessage): Promise<void> {
    return this.bus.post(to, message);
  }

  /** Shared: `listener` gets what other instances {@link post} here (one more Redis connection, subscribed). */
  onMessage(listener: (message: ClusterMessage) => void): void {
    if (this.closed) return;
    this.bus.listen(listener, (options) => duplicateClient(this.client, options));
  }

  /** Lets go of a session (draining): its owner record goes, its restore record stays for the next instance. */
  async handOff(sessionId: string): Promise<void> {
    // Shared: a copy ended here (idle, draining, or never recorded: its initialize was refused); the session and its record live on.
    this.created.delete(sessionId);
    if (this.held.delete(sessionId) || this.shared) return;
    if (!this.owned.delete(sessionId)) return;
    await RELEASE.run(this.client, [this.ownerKey(sessionId), '', this.generationKey(), this.instanceId, this.fenceGeneration]);
  }

  /**
   * Nothing while the last beat is recent. After a gap of two beats (a pause, a partition: peers
   * count this instance gone after three), a fresh beat first: it lets go of every session a peer
   * took over meanwhile, before any of them serves again (issue 20, item 1). Rejects when Redis
   * cannot be asked: serving blind could make two servers of one session.
   */
  confirmOwnership(): Promise<void> | undefined {
    if (this.closed) return undefined;
    // Shared: no owners; after a gap, the copies held here of sessions deleted meanwhile go.
    if (this.shared) return this.sharedGap();
    if (!this.stale()) return undefined;
    return this.beatAgain();
  }

  /**
   * Shared. After a gap — the subscriber connection dropped, or this process was frozen or starved
   * past two beats (its connection may have gone half-open meanwhile, losing what was published
   * on it), or its beats did not go through — an `ended` post may have been missed live: the
   * request waits for the copies to be checked (issue 27, item 7), at most `commandTimeoutMs`
   * (then 503: a possibly deleted session is never served). A check under way is waited for too.
   */
  private sharedGap(): Promise<void> | undefined {
    const now = Date.now();
    // A request served before the timer fired since a freeze finds the freeze itself.
    const frozen = now - this.tickedAt >= this.heartbeatMs * 2;
    if (frozen) this.tickedAt = now;
    const missedBeats = this.stale() && this.recheckedAt < this.beatSentAt + this.heartbeatMs * 2;
    if (this.busGap || frozen || missedBeats) return this.recheckHeld();
    return this.rechecking && this.bounded(this.rechecking);
  }

  /**
   * Shared: reads back what the bus kept for this instance while it was away (the messages run
   * here as if they had come live: an `ended` drops its copy), then lets go of each copy held here
   * whose record is gone (a session its client deleted while this instance was away, whose `ended`
   * is no longer kept: the engine drops it, 404 from then on). After Redis lost its data instead,
   * the records are written back, as at a beat. Rejects when Redis cannot be asked, or does not
   * answer within `commandTimeoutMs`: a deleted session must not be served blind.
   */
  private recheckHeld(): Promise<void> {
    this.rechecking ??= this.dropDeletedCopies().finally(() => (this.rechecking = undefined));
    return this.bounded(this.rechecking);
  }

  /** `check`, or a rejection once it took longer than `checkTimeoutMs` (it goes on; the next request waits for it again). */
  private bounded(check: Promise<void>): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`mcp-kit: Redis did not answer within ${this.checkTimeoutMs} ms to check the sessions held here`)),
        this.checkTimeoutMs,
      );
      timer.unref?.();
      check.then(resolve, reject).finally(() => clearTimeout(timer));
    });
  }

  private async dropDeletedCopies(): Promise<void> {
    const startedAt = Date.now();
    // Cleared first: a gap while the check runs calls for another one.
    this.busGap = false;
    try {
      await this.checkHeldCopies();
    } catch (error) {
      this.busGap = true;
      throw error;
    }
    // Not subscribed again yet: what is posted from now on is only read back, so the next request checks again.
    if (!this.bus.synced) this.busGap = true;
    this.recheckedAt = startedAt;
  }

  private async checkHeldCopies(): Promise<void> {
    const lostData = await this.redisLostData();
    await this.bus.resync();
    if (lostData) return this.rewriteRecords();
    const ids = [...this.held.keys()];
    for (let i = 0; i < ids.length; i += 1_000) {
      const batch = ids.slice(i, i + 1_000);
      const pipeline = this.client.pipeline();
      for (const id of batch) pipeline.exists(this.restoreKey(id));
      const replies = (await pipeline.exec()) ?? [];
      for (const [j, id] of batch.entries()) {
        const [error, exists] = replies[j] ?? [new Error('no reply')];
        if (error) throw error;
        if (exists === 0 && this.held.delete(id)) this.lostListener?.(id);
      }
    }
  }

  private stale(): boolean {
    return Date.now() - this.beatSentAt >= this.heartbeatMs * 2;
  }

  private async beatAgain(): Promise<void> {
    // The beat under way may have been sent before the gap: then one more.
    for (let attempt = 0; attempt < 2 && this.stale(); attempt++) await this.heartbeat();
    if (this.stale()) throw new Error('mcp-kit: no heartbeat went through to check which sessions this instance still owns');
  }

  /** Called with each session another instance took over while this one was away (see {@link SessionCluster.onLost}). */
  onLost(listener: (sessionId: string) => void): void {
    this.lostListener = listener;
  }

  /**
   * The other instances that beat, with their internal URLs: one round trip on the instances'
   * sorted set (never a scan of the keyspace, which costs thousands of round trips at 10,000
   * sessions, during a deploy: issue 20, item 4), and kept for half a heartbeat.
   */
  async peers(): Promise<SessionOwner[]> {
    // Shared: no instance can reach another; a draining one answers 503 and the client comes back elsewhere.
    if (this.shared) return [];
    const now = Date.now();
    if (this.peersCache && now - this.peersCache.at < this.heartbeatMs / 2) return this.peersCache.peers;
    const flat = (await PEERS.run(this.client, [
      this.instancesKey(),
      this.instanceId,
      this.ownerTimeoutMs,
      this.instanceKey(''),
    ])) as string[];
    const peers: SessionOwner[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2)
      peers.push({ instanceId: flat[i]!, self: false, principal: undefined, address: flat[i + 1]! });
    this.peersCache = { at: now, peers };
    return peers;
  }

  async lookupOwner(sessionId: string): Promise<SessionOwner | undefined> {
    if (this.shared) return undefined;
    const raw = await this.client.get(this.ownerKey(sessionId));
    if (raw === null) return undefined;
    let record: OwnerRecord;
    try {
      record = JSON.parse(raw) as OwnerRecord;
    } catch {
      return undefined;
    }
    const owner: SessionOwner = {
      instanceId: record.i,
      self: record.i === this.instanceId,
      principal: record.p ?? undefined,
      address: record.u,
    };
    if (owner.self) return owner;
    return (await this.isAlive(record.i)) ? owner : undefined;
  }

  /** Marks the session as followed from this instance for `3 × ownerCheckMs`. */
  async touch(sessionId: string): Promise<void> {
    await this.client.set(this.seenKey(sessionId), this.instanceId, 'PX', this.ownerCheckMs * 3);
  }

  async activeElsewhere(sessionId: string): Promise<boolean> {
    return (await this.client.exists(this.seenKey(sessionId))) === 1;
  }

  /** Whether a forwarded-by or handed-over-by header was signed by an instance of this cluster. */
  verifyHop(value: string, request: { method: string; sessionId: string | undefined }): boolean {
    return this.hops.verify(value, request);
  }

  forward(owner: SessionOwner, request: ForwardedRequest, responder: CoreResponder): Promise<void> {
    if (!owner.address) return Promise.reject(new Error(`no internal URL for instance ${owner.instanceId}`));
    return this.forwarder.forward(owner.address, request, responder);
  }

  /** Stops the heartbeat and gives up this instance's sessions at once (other instances answer 404). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    this.client.off('ready', this.onReady);
    this.client.off('close', this.onClose);
    this.forwarder.close();
    await this.bus.close();
    await this.beating;
    // Sessions their clients deleted here whose release did not go through yet: a last try.
    await Promise.all([...this.releasing].map((id) => this.release(id).catch(() => {})));
    const owned = [...this.owned.keys()];
    this.owned.clear();
    for (let i = 0; i < owned.length; i += 1_000)
      await RELEASE_OWNED.run(this.client, [this.instanceId, this.ownerKey(''), ...owned.slice(i, i + 1_000)]).catch(() => {});
    await this.client.del(this.instanceKey(this.instanceId)).catch(() => {});
    await this.client.zrem(this.instancesKey(), this.instanceId).catch(() => {});
    if (this.ownsClient) await this.client.quit().catch(() => this.client.disconnect());
  }

  /** Whether an instance has beaten within its TTL (a task whose owner is gone fails); cached for half a heartbeat. */
  instanceAlive(instanceId: string): Promise<boolean> {
    return instanceId === this.instanceId ? Promise.resolve(!this.closed) : this.isAlive(instanceId);
  }

  /** Whether an instance has beaten within its TTL; answers are cached for half a heartbeat. */
  private async isAlive(instanceId: string): Promise<boolean> {
    const now = Date.now();
    const cached = this.liveness.get(instanceId);
    if (cached && now - cached.at < this.heartbeatMs / 2) return cached.alive;
    const alive = (await this.client.exists(this.instanceKey(instanceId))) === 1;
    // Back from an outage (a failover, a restart): peers cut off with this instance had their keys
    // expire though they live, and beat again once their own connections are back, maybe a little
    // after this one's. Until they had a whole window for it, none counts as gone: a request for
    // its session is forwarded to it, and one that died meanwhile is taken over when the window
    // ends. An outage is no instance's death (issue 27: after a Sentinel failover, peers took over
    // live sessions and answered their running calls with the lost-instance error).
    if (!alive && this.backAt !== undefined && now - this.backAt < this.ownerTimeoutMs) return true;
    if (this.liveness.size > 1_000) this.liveness.clear();
    this.liveness.set(instanceId, { alive, at: now });
    return alive;
  }

  private heartbeat(): Promise<void> {
    if (this.closed || this.beating) return this.beating ?? Promise.resolve();
    this.beating = this.beat()
      .catch(() => {}) // Redis is down: the next beat tries again; requests meanwhile get 503s.
      .finally(() => {
        this.beating = undefined;
      });
    return this.beating;
  }

  private async beat(): Promise<void> {
    const sentAt = Date.now();
    const previous = await this.client.set(this.instanceKey(this.instanceId), this.internalUrl, 'PX', this.heartbeatMs * 3, 'GET');
    // Once per client (cached), also for an app that never calls ready(): a warning if Redis may evict (issue 27, item 6).
    void checkEvictionPolicy(this.client);
    const taken = (await BEAT_INDEX.run(this.client, [
      this.instancesKey(),
      this.takenKey(this.instanceId),
      this.instanceId,
      this.ownerTimeoutMs,
    ])) as string[];
    // Taken back by the instance that took them over last, after Redis lost its data (see RECLAIM).
    for (const id of taken) if (this.owned.has(id)) this.letGo(id);
    const now = Date.now();
    // Our key was gone, so our owner records may be too (Redis restarted): write them all again,
    // at this beat or, if it fails midway, the next.
    if (previous === null) this.reclaimAsked++;
    const asked = this.reclaimAsked;
    const all = this.reclaimDone < asked;
    if (!this.ownHopSecret && (all || this.hopSecret === undefined)) await this.shareHopSecret();
    const lostData = all && (await this.redisLostData());
    // Back after our key expired, with Redis' data intact (or at a refresh), a missing owner record
    // was ended or handed off on purpose, not lost with Redis: it is not brought back (see fence.ts).
    // Never written in a known generation yet: any record missing now may have gone with Redis.
    const dataLost = this.recordsGeneration === undefined || this.generation !== this.recordsGeneration ? '1' : '0';
    if (lostData && this.shared) await this.rewriteRecords();
    const due = [...this.owned].filter(([, o]) => all || now - o.refreshedAt > this.ownerTtlMs / 2);
    // Compare-and-set, never a blind write: a session a peer took over stays the peer's (issue 20, item 1).
    for (let i = 0; i < due.length; i += 1_000) {
      // A session released since is not written back.
      const batch = due.slice(i, i + 1_000).filter(([id]) => this.owned.has(id));
      const args = batch.flatMap(([id, o]) => [id, o.record]);
      const script = [this.instanceId, this.ownerTtlMs, this.ownerKey(''), dataLost, this.takenKey(''), ...args];
      const lost = (await RECLAIM.run(this.client, script)) as string[];
      for (const [, o] of batch) o.refreshedAt = now;
      for (const id of lost) this.letGo(id);
    }
    if (all) this.reclaimDone = asked;
    this.beatSentAt = sentAt;
    if (all) this.recordsGeneration = this.generation;
  }

  /** @internal The generation this instance's owner records were last all written in, `''` before its first beat: the event store's fence passes it (see fence.ts). */
  get fenceGeneration(): string {
    return this.recordsGeneration ?? '';
  }

  /** Shared, after Redis lost its data: the records of the sessions held here, written back unless a copy elsewhere did first. */
  private async rewriteRecords(): Promise<void> {
    const held = [...this.held];
    for (let i = 0; i < held.length; i += 1_000) {
      const pipeline = this.client.pipeline();
      for (const [id, { saved, ttlMs }] of held.slice(i, i + 1_000)) pipeline.set(this.restoreKey(id), saved, 'PX', ttlMs, 'NX');
      await pipeline.exec();
    }
  }

  /**
   * Whether Redis lost its data (restarted empty) since this instance last looked: a generation
   * key without TTL, made by the first instance to find it missing, changes then.
   */
  private async redisLostData(): Promise<boolean> {
    const current = (await GENERATION.run(this.client, [this.generationKey(), randomUUID()])) as string;
    const lost = this.generation === undefined || current !== this.generation;
    if (lost && this.generation !== undefined) this.dataLostAt = Date.now();
    this.generation = current;
    return lost;
  }

  /**
   * Whether Redis lost its data moments ago: its generation key is missing (nobody has beaten
   * since) or new to this instance, or this instance found it new less than three heartbeats ago.
   * Live owners write their records back at their next beat; until then a session with no record
   * may still be alive.
   */
  private async dataJustLost(): Promise<boolean> {
    const current = await this.client.get(`${this.prefix}generation`);
    if (current === null || (this.generation !== undefined && current !== this.generation)) return true;
    return this.dataLostAt !== undefined && Date.now() - this.dataLostAt < this.heartbeatMs * 3;
  }

  /** Another instance owns the session now: forget it here and tell the engine, which drops its copy. */
  private letGo(sessionId: string): void {
    this.owned.delete(sessionId);
    this.lost.add(sessionId);
    if (this.lost.size > 10_000) this.lost.delete(this.lost.values().next().value!);
    this.lostListener?.(sessionId);
  }

  /** Reads (or, first, makes) the hop secret all instances share; after Redis restarted empty, proposes the one it had. */
  private async shareHopSecret(): Promise<void> {
    this.hopSecret = await sharedHopSecret(this.client, `${this.prefix}hop-secret`, this.hopSecret);
    this.hops.setSecret(this.hopSecret);
  }

  private restoreKey(sessionId: string): string {
    return `${this.prefix}restore:${sessionId}`;
  }

  private generationKey(): string {
    return `${this.prefix}generation`;
  }

  /** Sessions a peer took back from the instance after Redis lost its data (see RECLAIM). */
  private takenKey(instanceId: string): string {
    return `${this.prefix}taken:${instanceId}`;
  }

  private ownerKey(sessionId: string): string {
    return `${this.prefix}owner:${sessionId}`;
  }

  private seenKey(sessionId: string): string {
    return `${this.prefix}seen:${sessionId}`;
  }

  private instancesKey(): string {
    return `${this.prefix}instances`;
  }

  private instanceKey(instanceId: string): string {
    return `${this.prefix}instance:${instanceId}`;
  }
}
