import type { ClusterMessage, RestoreRecord, Restored, SessionCopies } from '@mcp-kit/core';
import { pipelinePerNode, type KeyedCommand } from '../slots.js';
import { BUS_MAX_ENTRIES, BUS_RETENTION_MS, SharedBus } from './bus.js';
import { END_SHARED, SAVE_SHARED, UPDATE_SHARED, WRITE_BACK } from './copy-scripts.js';
import { encodeRecord, parseRecord } from './directory.js';
import { readLegacy } from './legacy.js';
import type { Beat } from './registry.js';
import { remember, type ClusterContext, type ClusterStrategy, type RecordChange } from './strategy.js';

/** Applies the client's `change` (one of the recorded methods) to a saved record, in place. */
export function applyChange(record: RestoreRecord, change: RecordChange): void {
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

/**
 * The shared mode (`mode: 'shared'`, serverless): no instance owns a session; any instance serves
 * any request with its own copy, restored from the record (`r` of the session's hash), which is
 * the session (the port's `SessionCopies`). What this instance holds: the principals of sessions created here until their
 * record is saved, the records of the copies it holds (written back if Redis loses its data:
 * nobody owns them, so nobody else would), the bus, which follows each session held here, and
 * whether it may have missed a message since it last checked its copies (a dropped subscriber
 * connection, a freeze).
 */
export class Copies implements ClusterStrategy, SessionCopies {
  /** The principals of sessions created here whose record is not saved yet. */
  private readonly created = new Map<string, string | null>();
  /** The records of the sessions this instance holds a copy of, as saved (and their principal, `''` none), and their TTL. */
  private readonly held = new Map<string, { record: string; principal: string; ttlMs: number }>();
  /** Sessions their clients deleted here whose end Redis has not taken yet. */
  private readonly releasing = new Set<string>();
  /** What instances send each other, kept in Redis until read (see {@link SharedBus}). */
  private readonly bus: SharedBus;
  /**
   * Since the held copies were last checked, the subscriber connection dropped or this process was
   * frozen, so a post may have been missed live (an `ended` among them).
   */
  private busGap = false;
  private rechecking: Promise<void> | undefined;
  private closed = false;
  /** When the last check of the held copies that went through started. */
  private recheckedAt = 0;

  constructor(private readonly ctx: ClusterContext) {
    this.bus = new SharedBus({
      client: ctx.client,
      keys: ctx.keys,
      instanceId: ctx.registry.instanceId,
      pingTimeoutMs: Math.max(ctx.registry.heartbeatMs * 2, 1_000),
      commandTimeoutMs: ctx.checkTimeoutMs,
      onGap: () => (this.busGap = true),
    });
  }

  async open(sessionId: string, principal: string | undefined): Promise<void> {
    // Nothing to own: the record, saved before the handshake's answer goes out, is the session.
    if (this.created.size >= 10_000) this.created.delete(this.created.keys().next().value!);
    this.created.set(sessionId, principal ?? null);
  }

  /** The client's DELETE (the only end in shared mode): the session ends everywhere. */
  async end(sessionId: string): Promise<boolean> {
    const { client, keys } = this.ctx;
    this.forget(sessionId);
    remember(this.releasing, sessionId);
    const ended = this.bus.envelope('*', { kind: 'ended', sessionId });
    await END_SHARED.run(client, [
      keys.session(sessionId),
      keys.inbox(sessionId),
      keys.busChannel(sessionId),
      ended,
      BUS_RETENTION_MS,
      BUS_MAX_ENTRIES,
    ]);
    this.releasing.delete(sessionId);
    return true;
  }

  async saveRecord(sessionId: string, record: RestoreRecord, ttlMs: number, change?: RecordChange): Promise<void> {
    const mine = this.created.has(sessionId);
    // Several copies may change the record at once: each applies its own change to it in Redis.
    if (change && !mine) return this.update(sessionId, change, ttlMs);
    const encoded = encodeRecord(record);
    const { client, keys } = this.ctx;
    const principal = await SAVE_SHARED.run(client, [
      keys.session(sessionId),
      encoded,
      this.created.get(sessionId) ?? '',
      ttlMs,
      mine ? '1' : '0',
    ]);
    this.created.delete(sessionId);
    if (typeof principal !== 'string') return;
    this.held.set(sessionId, { record: encoded, principal, ttlMs });
    // Made here: everything its inbox will hold is for this copy too.
    this.bus.follow(sessionId, '0-0');
  }

  /**
   * Applies the client's `change` to the record as it is in Redis (not to this copy's view of it,
   * which may lack what another copy changed a moment ago), with a compare-and-set that is tried
   * again on the record that won. A record that is gone stays gone (its session was deleted).
   */
  private async update(sessionId: string, change: RecordChange, ttlMs: number): Promise<void> {
    const { client, keys } = this.ctx;
    const key = keys.session(sessionId);
    const held = this.held.get(sessionId);
    let current: unknown = held?.record ?? (await client.hget(key, 'r'));
    for (let attempt = 0; attempt < 50; attempt++) {
      if (typeof current !== 'string') return;
      const record = parseRecord(current);
      applyChange(record, change);
      const next = encodeRecord(record);
      const reply = await UPDATE_SHARED.run(client, [key, current, next, ttlMs]);
      if (reply === 1) {
        this.held.set(sessionId, { record: next, principal: held?.principal ?? '', ttlMs });
        return;
      }
      current = reply;
    }
    throw new Error(`the record of session ${sessionId} kept changing under this update`);
  }

  kept(sessionIds: string[], ttlMs: number): void {
    for (const id of sessionIds) {
      const held = this.held.get(id);
      if (held) held.ttlMs = ttlMs;
    }
  }

  /**
   * The record of a session, for a copy of it here; nothing is taken from anyone. Its inbox' last
   * message is read first, in the same round trip: what is posted from then on reaches this copy.
   */
  async restore(sessionId: string, principal: string | undefined): Promise<Restored | undefined> {
    const { client, keys, registry } = this.ctx;
    const replies =
      (await client.pipeline().xrevrange(keys.inbox(sessionId), '+', '-', 'COUNT', 1).hmget(keys.session(sessionId), 'r', 'p').exec()) ??
      [];
    for (const [error] of replies) if (error) throw error;
    const last = replies[0]![1] as Array<[string, string[]]>;
    let [record, saved] = replies[1]![1] as [string | null, string | null];
    // A session of the keyspace before 0.2 (a rolling deploy from it): its record is written into the current one (see legacy.ts).
    if (record === null) {
      const legacy = (await readLegacy(client, keys, sessionId, true)).record;
      if (legacy) {
        const encoded = encodeRecord(legacy.record);
        await WRITE_BACK.run(client, [keys.session(sessionId), encoded, legacy.principal ?? '', legacy.ttlMs]);
        const [r, p] = await client.hmget(keys.session(sessionId), 'r', 'p');
        [record, saved] = [r ?? null, p ?? null];
      }
    }
    if (record === null) {
      if (await registry.dataJustLost(sessionId))
        throw new Error('Redis lost its data moments ago: the session may live on an instance that has not written its records back yet');
      return undefined;
    }
    if ((saved ?? '') !== (principal ?? '')) return { forbidden: true };
    this.held.set(sessionId, { record, principal: saved ?? '', ttlMs: this.held.get(sessionId)?.ttlMs ?? 30 * 60_000 });
    this.bus.follow(sessionId, last[0]?.[0] ?? '0-0');
    return { record: parseRecord(record), principal: saved ?? undefined };
  }

  /** This instance let go of its copy (idle, draining, or never recorded: its initialize was refused); the session and its record live on. */
  async letGo(sessionId: string): Promise<void> {
    this.forget(sessionId);
  }

  private forget(sessionId: string): void {
    this.created.delete(sessionId);
    this.held.delete(sessionId);
    this.bus.unfollow(sessionId);
  }

  /**
   * After a gap — the subscriber connection dropped, or this process was frozen or starved past
   * two beats (its connection may have gone half-open meanwhile, losing what was published on it),
   * or its beats did not go through — an `ended` post may have been missed live: the request
   * waits for the copies to be checked, at most `commandTimeoutMs` (then 503: a possibly deleted
   * session is never served). A check under way is waited for too.
   */
  confirmHeld(): Promise<void> | undefined {
    const { registry } = this.ctx;
    const now = Date.now();
    // A request served before the timer fired since a freeze finds the freeze itself.
    const frozen = now - registry.tickedAt >= registry.heartbeatMs * 2;
    if (frozen) registry.tickedAt = now;
    const missedBeats = registry.stale() && this.recheckedAt < registry.lastBeatAt + registry.heartbeatMs * 2;
    if (this.busGap || frozen || missedBeats) return this.recheckHeld();
    return this.rechecking && this.bounded(this.rechecking);
  }

  /**
   * `message` for the instance `to` (`'*'`: every instance; this one ignores its own), appended to
   * its inbox in Redis (kept {@link BUS_RETENTION_MS}) and published to wake it. Resolves once
   * stored: an instance that is not connected now reads it when it is back (see {@link SharedBus}).
   */
  post(to: string, message: ClusterMessage): Promise<void> {
    return this.bus.post(to, message);
  }

  /** `listener` gets what other instances post here (one more Redis connection, subscribed); nothing once closed. */
  onMessage(listener: (message: ClusterMessage) => void): void {
    if (this.closed) return;
    this.bus.listen(listener);
  }

  taken(): void {}

  /** After Redis lost its data: the records of the sessions held here, written back unless a copy elsewhere did first. */
  async beat({ lostData, lostDataOf }: Beat): Promise<void> {
    if (lostData) await this.rewriteRecords(lostDataOf);
  }

  tick(sinceLastTickMs: number): void {
    // Frozen (SIGSTOP, a serverless freeze) or starved past two beats: the bus may have lost what
    // it carried meanwhile (a half-open connection), so the held copies are checked again. Started
    // now rather than at the next request, which waits for it (a call waiting for an answer posted
    // meanwhile gets it without one).
    if (sinceLastTickMs >= this.ctx.registry.heartbeatMs * 2) {
      this.busGap = true;
      this.recheckHeld().catch(() => {}); // the next request checks again
    }
    this.bus.tick();
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.bus.close();
    // Sessions their clients deleted here whose end did not go through yet: a last try.
    await Promise.all([...this.releasing].map((id) => this.end(id).catch(() => {})));
  }

  /**
   * Reads back what the bus kept for this instance while it was away (the messages run here as if
   * they had come live: an `ended` drops its copy), then lets go of each copy held here whose
   * record is gone (a session its client deleted while this instance was away, whose `ended` is
   * no longer kept: the engine drops it, 404 from then on). After Redis lost its data instead, the
   * records are written back, as at a beat. Rejects when Redis cannot be asked, or does not answer
   * within `commandTimeoutMs`: a deleted session must not be served blind.
   */
  private recheckHeld(): Promise<void> {
    this.rechecking ??= this.dropDeletedCopies().finally(() => (this.rechecking = undefined));
    return this.bounded(this.rechecking);
  }

  /** `check`, or a rejection once it took longer than `checkTimeoutMs` (it goes on; the next request waits for it again). */
  private bounded(check: Promise<void>): Promise<void> {
    const { checkTimeoutMs } = this.ctx;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`mcp-kit: Redis did not answer within ${checkTimeoutMs} ms to check the sessions held here`)),
        checkTimeoutMs,
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
    const { client, keys, registry } = this.ctx;
    const lost = await registry.shardsThatLostData();
    await this.bus.resync();
    // The copies in a shard that lost its data are written back; the others are checked.
    const lostDataOf = (sessionId: string) => lost.has(registry.shardOf(sessionId));
    if (lost.size > 0) await this.rewriteRecords(lostDataOf);
    const ids = [...this.held.keys()].filter((id) => !lostDataOf(id));
    for (let i = 0; i < ids.length; i += 1_000) {
      const batch = ids.slice(i, i + 1_000);
      // One round trip per master: the sessions' hashes are in as many slots as sessions.
      const replies = await pipelinePerNode(
        client,
        batch.map((id): KeyedCommand => ['hexists', keys.session(id), 'r']),
      );
      for (const [j, id] of batch.entries()) {
        const [error, exists] = replies[j] ?? [new Error('no reply')];
        if (error) throw error;
        if (exists === 0 && this.held.has(id)) {
          this.forget(id);
          this.ctx.lost(id);
        }
      }
    }
  }

  /** The records of the copies held here (of the sessions `which` says), written back unless a copy elsewhere did first. */
  private async rewriteRecords(which: (sessionId: string) => boolean): Promise<void> {
    const { client, keys } = this.ctx;
    const held = [...this.held].filter(([id]) => which(id));
    for (let i = 0; i < held.length; i += 1_000)
      await Promise.all(
        held
          .slice(i, i + 1_000)
          .map(([id, { record, principal, ttlMs }]) => WRITE_BACK.run(client, [keys.session(id), record, principal, ttlMs])),
      );
  }
}
