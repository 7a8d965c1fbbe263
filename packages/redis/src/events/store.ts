import type { Redis } from 'ioredis';
import {
  StreamTakenOver,
  type EventStore,
  type ReplayResult,
  type StreamKey,
  type StreamListener,
  type StreamSubscription,
  type StreamWriter,
  type UnfinishedStream,
} from '@mcp-kit/core';
import { positiveInt } from '@mcp-kit/core/internal';
import { createRedisClient, LuaScript, whenReady } from '../client.js';
import { checkEvictionPolicy } from '../eviction.js';
import { MINE_LUA, NOT_MINE, type OwnerFence } from '../fence.js';
import { LiveStreams } from './live-streams.js';
import { LiveTails } from './tails.js';

export interface RedisEventStoreOptions {
  /** Redis to connect to, e.g. `redis://localhost:6379`. Give this or `client`. */
  url?: string;
  /**
   * An ioredis client to use instead of `url`; the store does not close it. Prefer one made with
   * {@link createRedisClient}: with ioredis' defaults (offline queue on, 20 retries) requests wait
   * instead of failing fast while Redis is down.
   */
  client?: Redis;
  /** Prefix of every key and channel. Default `'mcp-kit:'`. */
  keyPrefix?: string;
  /** Frames kept per stream (XADD MAXLEN, exact); older cursors get `evicted`. Default `10_000`. */
  maxEventsPerStream?: number;
  /**
   * A stream's key (and its session's index) expires this long after its last event (PEXPIRE on
   * every append). A cursor into an expired stream is `unknown`. Default `15 * 60_000`.
   */
  streamTtlMs?: number;
  /** Command timeout of the client created from `url`, in ms. Default `2_000`. */
  commandTimeoutMs?: number;
  /**
   * How long live tails wait for a lost subscriber connection to come back before they end (and
   * their clients resume elsewhere). Default `2_000`.
   */
  reconnectGraceMs?: number;
}

// KEYS: stream, session index, the session's owner record and the generation key ('' = no fence).
// ARGV: streamId, ttl, maxlen, request ids as JSON ('' for none), the writing instance ('' = not
// recorded), this instance's id and the generation its records were written in (for the fence).
// The `0-1` entry stands for seq 0, so `<token>.0` is a valid cursor before any event; in a shared
// cluster it names the instance that writes the stream. The request ids (`<stream>:req`) let
// another instance answer a call whose instance died (see unfinished and writer). With a fence, an
// instance whose session it is not (see fence.ts) opens no stream in it (issue 27, item 10).
const CREATE = new LuaScript(
  `${MINE_LUA}if KEYS[3] ~= '' and not mine(KEYS[3], KEYS[4], ARGV[6], ARGV[7]) then return redis.error_reply('ERR ${NOT_MINE}') end
if redis.call('EXISTS', KEYS[1]) == 0 then
  if ARGV[5] ~= '' then
    redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[3], '0-1', 'c', '1', 'w', ARGV[5])
  else
    redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[3], '0-1', 'c', '1')
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if ARGV[4] ~= '' then redis.call('SET', KEYS[1] .. ':req', ARGV[4], 'PX', ARGV[2]) end
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1`,
  4,
);

/** Refusals no retry can change: the session is not this instance's (the fence), or another instance answered the stream. */
const TAKEN_OVER = /another instance owns this session now|this stream is complete \(another instance answered it\)/;

// KEYS: stream, session index, the session's owner record and the generation key ('' = no fence).
// ARGV: entry id, frame, final, maxlen, ttl, streamId, seq, this instance's id, the generation its
// records were written in, '1' to store a final frame past frames Redis lost (see appendFinalAfterLoss).
// One round trip stores the frame, bounds the stream, and tells live tails on other instances.
// A frame already stored (a retry whose first reply was lost) is not stored twice, and one whose
// predecessor is missing (its write failed) is refused until that one is in: the owner retries
// them in order, so a stream never has a hole (issue 20, item 3). Nothing goes after a final
// frame: a stale owner cannot write past the error a new owner answered its lost call with. With a
// fence, an instance whose session it is not (a peer took it over, or it was handed off or ended:
// see fence.ts) stores nothing in it.
const APPEND = new LuaScript(
  `${MINE_LUA}if KEYS[3] ~= '' and not mine(KEYS[3], KEYS[4], ARGV[8], ARGV[9]) then return redis.error_reply('ERR ${NOT_MINE}') end
local seq = tonumber(ARGV[7])
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #last > 0 then
  local lastSeq = tonumber(string.match(last[1][1], '^(%d+)'))
  if lastSeq >= seq then return 0 end
  if last[1][2][4] == '1' then return redis.error_reply('ERR mcp-kit: this stream is complete (another instance answered it)') end
  if lastSeq < seq - 1 and ARGV[10] ~= '1' then return redis.error_reply('ERR mcp-kit: frame ' .. (lastSeq + 1) .. ' of this stream is not stored yet') end
end
redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[4], ARGV[1], 'f', ARGV[2], 'e', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('PEXPIRE', KEYS[1] .. ':req', ARGV[5])
redis.call('SADD', KEYS[2], ARGV[6])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
redis.call('PUBLISH', KEYS[1], ARGV[7] .. ' ' .. ARGV[3] .. ' ' .. ARGV[2])
return 1`,
  4,
);

// KEYS: stream, its retry key. ARGV: afterSeq, id of the first entry to return, ttl.
// A client still polling a running stream keeps its keys alive (issue 20, item 2).
// Returns {0} unknown, {1[, final frame]} evicted, or {2, lastSeq, complete, retry or -1, frames...}. A replay
// that is not contiguous (a frame lost in a Redis restart) counts as evicted: never partial.
const REPLAY = new LuaScript(
  `local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #last == 0 then return {0} end
local lastSeq = tonumber(string.match(last[1][1], '^(%d+)'))
local fields = last[1][2]
local complete = 0
if fields[1] == 'f' and fields[4] == '1' then complete = 1 end
local after = tonumber(ARGV[1])
if after > lastSeq then return {0} end
local gap = {1}
if complete == 1 then gap = {1, fields[2]} end
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
if tonumber(string.match(first[1][1], '^(%d+)')) > after + 1 then return gap end
local retry = tonumber(redis.call('GET', KEYS[2]) or '-1')
if complete == 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  redis.call('PEXPIRE', KEYS[1] .. ':req', ARGV[3])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
local out = {2, lastSeq, complete, retry}
local entries = redis.call('XRANGE', KEYS[1], ARGV[2], '+')
for i = 1, #entries do
  if tonumber(string.match(entries[i][1], '^(%d+)')) ~= after + i then return gap end
  out[i + 4] = entries[i][2][2]
end
return out`,
  2,
);

// KEYS: stream, its retry key, the session's owner record and the generation key ('' = no fence).
// ARGV: afterSeq, retryMs, ttl, this instance's id, the generation its records were written in.
// Keeps the close's retry for resumes on any instance, and tells the live tails to end; with a
// fence, only while the session is this instance's (see fence.ts).
const CLOSE = new LuaScript(
  `${MINE_LUA}if KEYS[3] ~= '' and not mine(KEYS[3], KEYS[4], ARGV[4], ARGV[5]) then return redis.error_reply('ERR ${NOT_MINE}') end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
redis.call('PUBLISH', KEYS[1], ARGV[1] .. ' c ' .. ARGV[2])
return 1`,
  4,
);

// KEYS: session index. ARGV: stream key prefix of the session.
// Keys are built from the index: they share its hash tag, so this holds on Redis Cluster too.
const DELETE = new LuaScript(
  `local ids = redis.call('SMEMBERS', KEYS[1])
for i = 1, #ids do
  local key = ARGV[1] .. ids[i]
  redis.call('DEL', key, key .. ':retry', key .. ':req')
  redis.call('PUBLISH', key, '0 d')
end
redis.call('DEL', KEYS[1])
return #ids`,
  1,
);

// KEYS: session index. ARGV: stream key prefix of the session.
// The session's streams whose final frame is not stored: {streamId, lastSeq, request ids JSON} each.
const UNFINISHED = new LuaScript(
  `local out = {}
local ids = redis.call('SMEMBERS', KEYS[1])
for i = 1, #ids do
  local key = ARGV[1] .. ids[i]
  local last = redis.call('XREVRANGE', key, '+', '-', 'COUNT', 1)
  if #last > 0 then
    local fields = last[1][2]
    if not (fields[1] == 'f' and fields[4] == '1') then
      out[#out + 1] = {ids[i], tonumber(string.match(last[1][1], '^(%d+)')), redis.call('GET', key .. ':req') or ''}
    end
  end
end
return out`,
  1,
);

// KEYS: stream. Returns {0} unknown, or {1, writer ('' unknown), lastSeq, complete (0/1), request ids JSON ('' none)}.
const WRITER = new LuaScript(
  `local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
if #last == 0 then return {0} end
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
local writer = ''
if first[1][1] == '0-1' and first[1][2][3] == 'w' then writer = first[1][2][4] end
local fields = last[1][2]
local complete = 0
if fields[1] == 'f' and fields[4] == '1' then complete = 1 end
return {1, writer, tonumber(string.match(last[1][1], '^(%d+)')), complete, redis.call('GET', KEYS[1] .. ':req') or ''}`,
  1,
);

/** A {@link StreamTakenOver} for a refusal no retry can change (see {@link TAKEN_OVER}); `undefined` for any other error. */
function refusedForGood(error: unknown): StreamTakenOver | undefined {
  return error instanceof Error && TAKEN_OVER.test(error.message) ? new StreamTakenOver(error.message) : undefined;
}

/**
 * APPEND's refusal of a frame whose predecessor is not in the stream; `missingSeq` is the first
 * frame missing. Passing while that frame's own write is still on its way (appends are pipelined:
 * the next frame's first try may reach Redis before its predecessor's retry). For good once the
 * writer had `missingSeq` acknowledged: Redis lost it (a failover to a replica it had not reached
 * yet, replication being asynchronous), and every later frame of the stream is refused the same way.
 * The writer tells which; core knows this error by its name, as it knows `StreamTakenOver`.
 */
export class StreamGap extends Error {
  override readonly name = 'StreamGap';
  constructor(
    message: string,
    readonly missingSeq: number,
  ) {
    super(message);
  }
}

/** A {@link StreamGap} for APPEND's "frame N of this stream is not stored yet"; `undefined` for any other error. */
function streamGap(error: unknown): StreamGap | undefined {
  const missing = error instanceof Error ? /frame (\d+) of this stream is not stored yet/.exec(error.message) : null;
  return missing ? new StreamGap((error as Error).message, Number(missing[1])) : undefined;
}

/**
 * An {@link EventStore} on Redis Streams, for several instances behind a load balancer: one stream
 * key per (session, stream), entry id `<seq>-0`, XADD with an exact MAXLEN and a TTL refreshed on
 * every append, XRANGE to replay. Appends are also published on the stream's channel, which
 * {@link subscribe} turns into an ordered, gapless live tail on any instance.
 *
 * Keys: `<prefix>{<sessionId>}:<streamId>` (a stream) and `<prefix>{<sessionId>}` (the set of the
 * session's stream ids, for `deleteSession`). Event ids stay the engine's opaque
 * `<token>.<seq>`; a stream is found only under the session that created it.
 */
export class RedisEventStore implements EventStore {
  readonly client: Redis;
  readonly keyPrefix: string;
  readonly maxEventsPerStream: number;
  readonly streamTtlMs: number;
  private readonly ownsClient: boolean;
  private readonly tails: LiveTails;
  private closed = false;
  /** Streams this instance still writes to, whose keys it keeps alive. */
  private readonly live: LiveStreams;
  /** With a forwarding cluster on the same Redis: writes check that the session is still this instance's. */
  private readonly fence: OwnerFence | undefined;
  /** With a shared cluster: this instance's id, recorded as the writer of each stream it creates. */
  private readonly writerId: string | undefined;

  constructor(
    options: RedisEventStoreOptions & {
      /** @internal */ ownsClient?: boolean;
      /** @internal Set by `createRedisScaleOut`: the cluster's instance and owner records (issue 20, item 1; issue 27, item 10). */
      fence?: OwnerFence;
      /** @internal Set by `createRedisScaleOut` for a shared cluster: whose streams these are (see `writer`). */
      writerId?: string;
    } = {},
  ) {
    if (!options.client && !options.url)
      throw new TypeError('RedisEventStore: give `url` (e.g. process.env.REDIS_URL) or an ioredis `client`');
    const commandTimeoutMs = positiveInt(options.commandTimeoutMs ?? 2_000, 'commandTimeoutMs', 'RedisEventStore');
    this.client = options.client ?? createRedisClient(options.url as string, { commandTimeoutMs, connectionName: 'mcp-kit-events' });
    this.ownsClient = options.ownsClient ?? !options.client;
    this.keyPrefix = options.keyPrefix ?? 'mcp-kit:';
    this.maxEventsPerStream = positiveInt(options.maxEventsPerStream ?? 10_000, 'maxEventsPerStream', 'RedisEventStore');
    this.streamTtlMs = positiveInt(options.streamTtlMs ?? 15 * 60_000, 'streamTtlMs', 'RedisEventStore');
    const reconnectGraceMs = positiveInt(options.reconnectGraceMs ?? 2_000, 'reconnectGraceMs', 'RedisEventStore');
    this.live = new LiveStreams(this.client, this.streamTtlMs);
    this.tails = new LiveTails(
      this.client,
      (sessionId, streamId, afterSeq) => this.replayAfter(sessionId, streamId, afterSeq),
      (key) => this.streamKey(key),
      reconnectGraceMs,
      commandTimeoutMs,
    );
    this.fence = options.fence;
    this.writerId = options.writerId;
  }

  /**
   * Resolves once Redis answers (with `timeoutMs`, rejects after that long). Until then, and
   * whenever Redis is unreachable, every method rejects at once and requests get 503s. Warns once
   * if Redis may evict keys (its `maxmemory-policy` is not `noeviction`).
   */
  async ready(timeoutMs?: number): Promise<void> {
    await whenReady(this.client, timeoutMs);
    await checkEvictionPolicy(this.client);
  }

  async createStream(key: StreamKey, requestIds?: Iterable<string | number>): Promise<void> {
    const ids = requestIds === undefined ? [] : [...requestIds];
    this.live.add(key.sessionId, this.indexKey(key.sessionId), this.streamKey(key));
    const [owner, generation, me, seen] = this.fenceArgs(key.sessionId);
    try {
      await CREATE.run(this.client, [
        this.streamKey(key),
        this.indexKey(key.sessionId),
        owner,
        generation,
        key.streamId,
        this.streamTtlMs,
        this.maxEventsPerStream,
        ids.length > 0 ? JSON.stringify(ids) : '',
        this.writerId ?? '',
        me,
        seen,
      ]);
    } catch (error) {
      const refused = refusedForGood(error);
      // Never opened: this instance will not write to it.
      if (refused) this.live.remove(key.sessionId, this.streamKey(key));
      throw refused ?? error;
    }
  }

  /** The instance that writes a request stream (recorded in a shared cluster), its requests and how far it got. */
  async writer(key: StreamKey): Promise<StreamWriter | undefined> {
    const reply = (await WRITER.run(this.client, [this.streamKey(key)])) as [number, string?, number?, number?, string?];
    if (reply[0] === 0 || !reply[1]) return undefined;
    return {
      instanceId: reply[1],
      lastSeq: reply[2]!,
      complete: reply[3] === 1,
      requestIds: reply[4] ? (JSON.parse(reply[4]) as Array<string | number>) : [],
    };
  }

  async unfinished(sessionId: string): Promise<UnfinishedStream[]> {
    const rows = (await UNFINISHED.run(this.client, [this.indexKey(sessionId), `${this.keyPrefix}{${sessionId}}:`])) as Array<
      [string, number, string]
    >;
    return rows.map(([streamId, lastSeq, req]) => ({
      streamId,
      lastSeq,
      requestIds: req === '' ? [] : (JSON.parse(req) as Array<string | number>),
    }));
  }

  append(key: StreamKey, seq: number, frame: string, final: boolean): Promise<void> {
    return this.store(key, seq, frame, final, false);
  }

  /**
   * The stream's final frame, past frames Redis lost after acknowledging them (a failover to a
   * replica they had not reached; {@link StreamGap}): REPLAY finds the gap and hands a resume on
   * any instance this frame as the stream's end, and a live tail that misses the gap ends and its
   * client resumes so. Fenced like any append.
   */
  appendFinalAfterLoss(key: StreamKey, seq: number, frame: string): Promise<void> {
    return this.store(key, seq, frame, true, true);
  }

  private async store(key: StreamKey, seq: number, frame: string, final: boolean, pastLoss: boolean): Promise<void> {
    const flag = final ? '1' : '0';
    if (final) this.live.remove(key.sessionId, this.streamKey(key));
    else this.live.add(key.sessionId, this.indexKey(key.sessionId), this.streamKey(key));
    const [owner, generation, me, seen] = this.fenceArgs(key.sessionId);
    try {
      await APPEND.run(this.client, [
        this.streamKey(key),
        this.indexKey(key.sessionId),
        owner,
        generation,
        `${seq}-0`,
        frame,
        flag,
        this.maxEventsPerStream,
        this.streamTtlMs,
        key.streamId,
        seq,
        me,
        seen,
        pastLoss ? '1' : '0',
      ]);
    } catch (error) {
      // Refused for good, not an outage: the writer stops instead of retrying (issue 27, item 9).
      throw refusedForGood(error) ?? streamGap(error) ?? error;
    }
  }

  /** The fence's keys (the session's owner record, the generation key) and arguments (this instance, the generation it saw); `''` each without one. */
  private fenceArgs(sessionId: string): [string, string, string, string] {
    const fence = this.fence;
    if (!fence) return ['', '', '', ''];
    return [`${fence.ownerKeyPrefix}${sessionId}`, fence.generationKey, fence.instanceId, fence.generation()];
  }

  async replayAfter(sessionId: string, streamId: string, afterSeq: number): Promise<ReplayResult> {
    if (!Number.isSafeInteger(afterSeq) || afterSeq < 0) return { ok: false, reason: 'unknown' };
    const stream = this.streamKey({ sessionId, streamId });
    const reply = (await REPLAY.run(this.client, [stream, `${stream}:retry`, afterSeq, `${afterSeq + 1}-0`, this.streamTtlMs])) as [
      number,
      ...unknown[],
    ];
    if (reply[0] === 0) return { ok: false, reason: 'unknown' };
    if (reply[0] === 1)
      return typeof reply[1] === 'string' ? { ok: false, reason: 'evicted', final: reply[1] } : { ok: false, reason: 'evicted' };
    const retry = reply[3] as number;
    const result: ReplayResult = { ok: true, lastSeq: reply[1] as number, complete: reply[2] === 1, frames: reply.slice(4) as string[] };
    if (retry >= 0) result.retryMs = retry;
    return result;
  }

  /**
   * The owner's `closeSSEStream`: keeps its retry hint (`<stream key>:retry`, for `streamTtlMs`)
   * so a resume on any instance primes with it, and tells the stream's live tails to end with it.
   */
  async closeTails(key: StreamKey, afterSeq: number, retryMs: number): Promise<void> {
    const [owner, generation, me, seen] = this.fenceArgs(key.sessionId);
    const keys = [this.streamKey(key), `${this.streamKey(key)}:retry`, owner, generation];
    try {
      await CLOSE.run(this.client, [...keys, afterSeq, retryMs, this.streamTtlMs, me, seen]);
    } catch (error) {
      throw refusedForGood(error) ?? error;
    }
  }

  /**
   * This instance writes no more to the stream (or to any stream of the session): its keys are no
   * longer refreshed, and age out `streamTtlMs` after their last event or resume (issue 27, item 8).
   */
  letGo(sessionId: string, streamId?: string): void {
    if (streamId === undefined) this.live.removeSession(sessionId);
    else this.live.remove(sessionId, this.streamKey({ sessionId, streamId }));
  }

  /** @internal For tests: how many streams this instance keeps alive (see {@link letGo}). */
  get liveStreamCount(): number {
    return this.live.size;
  }

  async deleteSession(sessionId: string): Promise<void> {
    this.live.removeSession(sessionId);
    await DELETE.run(this.client, [this.indexKey(sessionId), `${this.keyPrefix}{${sessionId}}:`]);
  }

  /**
   * Follows a stream from any instance: subscribes to its channel, then reads what was appended
   * after `afterSeq` (so nothing falls between the two), then delivers published frames in seq
   * order; a gap (a message lost while the subscriber connection was down) is filled from the
   * stream. One subscriber connection per store serves every tail.
   */
  subscribe(key: StreamKey, afterSeq: number, listener: StreamListener): Promise<StreamSubscription> {
    return this.tails.subscribe(key, afterSeq, listener);
  }

  /** Live tails on this instance, for tests and metrics. */
  get tailCount(): number {
    return this.tails.count;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.live.close();
    this.tails.close();
    if (this.ownsClient) await this.client.quit().catch(() => this.client.disconnect());
  }

  private streamKey(key: StreamKey): string {
    return `${this.keyPrefix}{${key.sessionId}}:${key.streamId}`;
  }

  private indexKey(sessionId: string): string {
    return `${this.keyPrefix}{${sessionId}}`;
  }
}
