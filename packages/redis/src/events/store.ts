import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import {
  type EventStore,
  type ReplayResult,
  type StreamKey,
  type StreamListener,
  type StreamSubscription,
  type StreamWriter,
  type UnfinishedStream,
} from '@mcp-kit/core';
import { positiveInt } from '@mcp-kit/core/internal';
import { checkClient, createRedisClient, whenReady } from '../client.js';
import { checkEvictionPolicy } from '../eviction.js';
import type { OwnerFence, StoreLink } from '../fence.js';
import { Keyspace } from '../keyspace.js';
import { fenced, refusal } from './refusals.js';
import { registeredStreams, unfinishedStreams } from './registrations.js';
import { APPEND, CLOSE, CREATE, DELETE, REPLAY, WRITER } from './scripts.js';
import { LiveTails } from './tails.js';
import { StreamWriters, type WriteBatch } from './writers.js';

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
   * A stream's key expires at least this long after its last event (and at most a third longer:
   * its TTL is refreshed every third of it while this instance writes it, not at every event).
   * A cursor into an expired stream is `unknown`. Default `15 * 60_000`.
   */
  streamTtlMs?: number;
  /** Command timeout of the client created from `url`, in ms. Default `2_000`. */
  commandTimeoutMs?: number;
  /**
   * How long live tails wait for a lost subscriber connection to come back before they end (and
   * their clients resume elsewhere). Default `2_000`.
   */
  reconnectGraceMs?: number;
  /**
   * The `RedisSessionCluster` whose sessions this store writes (same Redis, same `keyPrefix`).
   * `createRedisScaleOut` passes it; give it when you build the two yourself. In a forwarding
   * cluster it brings the owner fence: an instance that was away past its heartbeat window stores
   * nothing in a session a peer took over. In a shared one, each stream names the instance writing
   * it, so a resume elsewhere answers its calls with an error once that instance stops beating.
   * A cluster no store was given warns (`MCP_KIT_UNLINKED_EVENT_STORE`) at its first session.
   */
  cluster?: StoreLink;
}

/**
 * An {@link EventStore} on Redis, for several instances behind a load balancer: one key per
 * (session, stream), a Redis stream (entry id `<seq>-0`, `XADD` with an exact `MAXLEN`, `XRANGE` to
 * replay) or, for a stream whose only frame was its final one, a string. Each append is one `XADD`
 * and one `PUBLISH` on the stream's channel, which {@link subscribe} turns into an ordered,
 * gapless live tail on any instance; TTLs are refreshed per interval, not per event.
 *
 * Keys (see `keyspace.ts`): `<prefix>{<session>}:<stream>`, its `:retry`, and the streams'
 * registrations in the session's hash `<prefix>{<session>}:s` (for `deleteSession`, `unfinished`,
 * `writer`, and the `.0` cursor before a stream's first frame). Event ids stay the engine's opaque
 * `<token>.<seq>`; a stream is found only under the session that created it.
 */
export class RedisEventStore implements EventStore {
  readonly client: Redis;
  readonly keyPrefix: string;
  readonly maxEventsPerStream: number;
  readonly streamTtlMs: number;
  private readonly keys: Keyspace;
  private readonly ownsClient: boolean;
  private readonly tails: LiveTails;
  private closed = false;
  /** Streams this instance writes, one batch at a time each, whose keys it keeps alive. */
  private readonly writers: StreamWriters;
  /** With a forwarding cluster: writes check that the session is still this instance's. */
  private readonly fence: OwnerFence | undefined;
  /** The instance recorded as the writer of each stream made here (`''` without a cluster). */
  private readonly writerId: string;

  constructor(options: RedisEventStoreOptions & { /** @internal */ ownsClient?: boolean } = {}) {
    if (!options.client && !options.url)
      throw new TypeError('RedisEventStore: give `url` (e.g. process.env.REDIS_URL) or an ioredis `client`');
    if (options.client) checkClient(options.client, 'RedisEventStore');
    const commandTimeoutMs = positiveInt(options.commandTimeoutMs ?? 2_000, 'commandTimeoutMs', 'RedisEventStore');
    this.client = options.client ?? createRedisClient(options.url as string, { commandTimeoutMs, connectionName: 'mcp-kit-events' });
    this.ownsClient = options.ownsClient ?? !options.client;
    this.keyPrefix = options.keyPrefix ?? 'mcp-kit:';
    this.keys = new Keyspace(this.keyPrefix);
    this.maxEventsPerStream = positiveInt(options.maxEventsPerStream ?? 10_000, 'maxEventsPerStream', 'RedisEventStore');
    this.streamTtlMs = positiveInt(options.streamTtlMs ?? 15 * 60_000, 'streamTtlMs', 'RedisEventStore');
    const reconnectGraceMs = positiveInt(options.reconnectGraceMs ?? 2_000, 'reconnectGraceMs', 'RedisEventStore');
    const refreshMs = Math.max(Math.floor(this.streamTtlMs / 3), 10);
    const link = options.cluster;
    link?.linkStore();
    this.fence = link?.fence;
    this.writerId = link?.writerId ?? '';
    this.writers = new StreamWriters(
      this.client,
      this.streamTtlMs + refreshMs,
      refreshMs,
      randomBytes(6).toString('base64url'),
      this.writeBatch,
    );
    this.tails = new LiveTails(
      this.client,
      (sessionId, streamId, afterSeq) => this.replayAfter(sessionId, streamId, afterSeq),
      (key) => this.keys.stream(key.sessionId, key.streamId),
      reconnectGraceMs,
      commandTimeoutMs,
    );
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
    const stream = this.writers.open(key.sessionId, key.streamId, this.keysOf(key));
    const registration = JSON.stringify([key.streamId, this.writerId, ids]);
    try {
      await fenced(this.fence, 0, (force) =>
        CREATE.run(this.client, [
          this.keys.session(key.sessionId),
          stream.field,
          registration,
          this.fence?.instanceId ?? '',
          force,
          this.writers.keyTtlMs,
        ]),
      );
    } catch (error) {
      // Never opened: this instance will not write to it (a retry opens it again).
      this.writers.remove(key.sessionId, key.streamId);
      throw refusal(error);
    }
  }

  append(key: StreamKey, seq: number, frame: string, final: boolean): Promise<void> {
    const stream = this.writers.get(key.sessionId, key.streamId);
    // Not a stream this instance writes: the answer to a lost call (the instance that wrote it is gone).
    if (!stream) return this.appendOnce(key, seq, frame, final, 'f');
    const stored = this.writers.append(stream, seq, frame, final);
    return final ? stored.then(() => this.writers.remove(key.sessionId, key.streamId)) : stored;
  }

  /**
   * The stream's final frame, past frames Redis lost after acknowledging them (a failover to a
   * replica they had not reached; `StreamGap`): REPLAY finds the gap and hands a resume on
   * any instance this frame as the stream's end, and a live tail that misses the gap ends and its
   * client resumes so. Fenced like any append.
   */
  async appendFinalAfterLoss(key: StreamKey, seq: number, frame: string): Promise<void> {
    await this.appendOnce(key, seq, frame, true, 'l');
    this.writers.remove(key.sessionId, key.streamId);
  }

  /** One frame, with the append script's checks first (`flags`, see APPEND). */
  private async appendOnce(key: StreamKey, seq: number, frame: string, final: boolean, flags: string): Promise<void> {
    await this.runAppend(this.keysOf(key), flags, [{ seq, frame, final }]);
  }

  /** How {@link StreamWriters} stores a batch of one stream's frames. */
  private readonly writeBatch: WriteBatch = (stream, frames) => {
    const flags = !stream.created ? 'n' : this.writers.newConnection(stream) ? 'v' : '';
    return this.runAppend({ stream: stream.key, hash: this.keys.session(stream.sessionId), streamId: stream.streamId }, flags, frames);
  };

  private async runAppend(
    keys: { stream: string; hash: string; streamId: string },
    flags: string,
    frames: Array<{ seq: number; frame: string; final: boolean }>,
  ): Promise<void> {
    const args = frames.flatMap((f) => [f.seq, f.frame, f.final ? '1' : '0']);
    try {
      await fenced(this.fence, frames.length, (force, stored) =>
        APPEND.run(this.client, [
          keys.stream,
          keys.hash,
          this.fence?.instanceId ?? '',
          force,
          this.maxEventsPerStream,
          this.writers.keyTtlMs,
          // Past what went in before the refusal, the stream is not new any more.
          stored > 0 ? flags.replace('n', '') : flags,
          keys.streamId,
          ...args.slice(stored * 3),
        ]),
      );
    } catch (error) {
      throw refusal(error);
    }
  }

  /** The instance that writes a request stream (recorded in a shared cluster), its requests and how far it got. */
  async writer(key: StreamKey): Promise<StreamWriter | undefined> {
    const keys = this.keysOf(key);
    const reply = (await WRITER.run(this.client, [keys.stream, keys.hash, key.streamId])) as [number, string?, number?, number?, string?];
    if (reply[0] === 0 || !reply[1]) return undefined;
    return {
      instanceId: reply[1],
      lastSeq: reply[2]!,
      complete: reply[3] === 1,
      requestIds: reply[4] ? (JSON.parse(reply[4]) as Array<string | number>) : [],
    };
  }

  /** The session's registered streams whose final frame is not stored, read in two round trips (the registrations, then each stream's last entry). */
  unfinished(sessionId: string): Promise<UnfinishedStream[]> {
    return unfinishedStreams(this.client, this.keys, sessionId);
  }

  async replayAfter(sessionId: string, streamId: string, afterSeq: number): Promise<ReplayResult> {
    if (!Number.isSafeInteger(afterSeq) || afterSeq < 0) return { ok: false, reason: 'unknown' };
    const keys = this.keysOf({ sessionId, streamId });
    const reply = (await REPLAY.run(this.client, [
      keys.stream,
      keys.retry,
      keys.hash,
      afterSeq,
      `${afterSeq + 1}-0`,
      this.writers.keyTtlMs,
      streamId,
    ])) as [number, ...unknown[]];
    if (reply[0] === 0) return { ok: false, reason: 'unknown' };
    if (reply[0] === 1)
      return typeof reply[1] === 'string' ? { ok: false, reason: 'evicted', final: reply[1] } : { ok: false, reason: 'evicted' };
    const retry = reply[3] as number;
    const result: ReplayResult = { ok: true, lastSeq: reply[1] as number, complete: reply[2] === 1, frames: reply.slice(4) as string[] };
    if (retry >= 0) result.retryMs = retry;
    return result;
  }

  /**
   * The owner's `closeSSEStream`: keeps its retry hint (`<stream key>:retry`, as long as the
   * stream) so a resume on any instance primes with it, and tells the stream's live tails to end with it.
   */
  async closeTails(key: StreamKey, afterSeq: number, retryMs: number): Promise<void> {
    const keys = this.keysOf(key);
    const stream = this.writers.get(key.sessionId, key.streamId);
    try {
      await fenced(this.fence, 0, (force) =>
        CLOSE.run(this.client, [
          keys.stream,
          keys.retry,
          keys.hash,
          afterSeq,
          retryMs,
          this.writers.keyTtlMs,
          this.fence?.instanceId ?? '',
          force,
        ]),
      );
    } catch (error) {
      throw refusal(error);
    }
    if (stream) stream.closed = true;
  }

  /**
   * This instance writes no more to the stream (or to any stream of the session): its keys are no
   * longer refreshed, and age out `streamTtlMs` after their last event or resume.
   */
  doneWriting(sessionId: string, streamId?: string): void {
    if (streamId === undefined) this.writers.removeSession(sessionId);
    else this.writers.remove(sessionId, streamId);
  }

  /** @internal For tests: how many streams this instance keeps alive (see {@link doneWriting}). */
  get liveStreamCount(): number {
    return this.writers.size;
  }

  /** The session's streams, their retry keys and its hash go, and their live tails are told; read first, so the script names every key it deletes. */
  async deleteSession(sessionId: string): Promise<void> {
    this.writers.removeSession(sessionId);
    const streams = await registeredStreams(this.client, this.keys, sessionId);
    const keys = [this.keys.session(sessionId)];
    for (const { streamId } of streams) keys.push(this.keys.stream(sessionId, streamId), this.keys.retry(sessionId, streamId));
    await DELETE.run(this.client, keys, keys.length);
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
    this.writers.close();
    this.tails.close();
    if (this.ownsClient) await this.client.quit().catch(() => this.client.disconnect());
  }

  private keysOf(key: StreamKey): { stream: string; retry: string; hash: string; streamId: string } {
    return {
      streamId: key.streamId,
      stream: this.keys.stream(key.sessionId, key.streamId),
      retry: this.keys.retry(key.sessionId, key.streamId),
      hash: this.keys.session(key.sessionId),
    };
  }
}
