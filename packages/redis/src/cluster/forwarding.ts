import type { CoreResponder, ForwardedRequest, RestoreRecord, SessionOwner, SessionOwners, TakeOver } from '@mcp-kit/core';
import { HttpForwarder, type ForwarderOptions } from '../forward.js';
import { refusalOf, ScriptRefusal } from '../script-errors.js';
import { CLAIM, RECLAIM, RELEASE, RELEASE_OWNED, SAVE_RECORD, TAKE_OVER } from './owner-scripts.js';
import { encodeRecord, parseRecord, sessionFields } from './directory.js';
import { legacyStreams, MOVE_OVER, readLegacy } from './legacy.js';
import type { Beat } from './registry.js';
import { remember, type ClusterContext, type ClusterStrategy } from './strategy.js';

/**
 * The forwarding mode (`internalUrl`): each session has an owner, the instance that answered its
 * `initialize` or took it over, named in the session's hash (`o`, `u`, `e`); the others forward
 * its requests there over HTTP (the port's `SessionOwners`). What this instance holds: the
 * sessions it owns (checked after it was away, written back after Redis lost them), the sessions a
 * peer took over while it was away, and the ends Redis has not taken yet.
 */
export class Owners implements ClusterStrategy, SessionOwners {
  /** The sessions this instance owns, with the time it took each over (`''`: it created it) and its principal (`''` none). */
  private readonly owned = new Map<string, { epoch: string; principal: string }>();
  /** Sessions taken over by another instance while this one was away, until the engine lets them go. */
  private readonly takenAway = new Set<string>();
  /** Sessions their clients deleted here whose release Redis has not taken yet (the engine tries again, and `close` once more). */
  private readonly releasing = new Set<string>();
  private readonly forwarder: HttpForwarder;

  constructor(
    private readonly ctx: ClusterContext,
    forwarding: Omit<ForwarderOptions, 'instanceId' | 'sign'>,
    private readonly ownerTtlMs: number,
  ) {
    const { registry } = ctx;
    this.forwarder = new HttpForwarder({
      ...forwarding,
      instanceId: registry.instanceId,
      sign: (request) => registry.hops.sign(registry.instanceId, request),
    });
  }

  /** An instance counts as gone `3 × heartbeatMs` after its last beat. */
  get ownerTimeoutMs(): number {
    return this.ctx.registry.ownerTimeoutMs;
  }

  /** A session opens here: this instance is its owner (`CLAIM`). */
  async open(sessionId: string, principal: string | undefined): Promise<void> {
    const { client, keys, registry } = this.ctx;
    // Two slots: this instance's presence in the session's shard (whose loss says the shard may have
    // lost this instance's sessions) and the session's.
    const [previous] = await Promise.all([
      client.set(...registry.presenceArgs(sessionId)),
      CLAIM.run(client, [keys.session(sessionId), registry.instanceId, registry.internalUrl, principal ?? '', this.ownerTtlMs]),
    ]);
    const lost = previous === null && this.owned.size > 0;
    this.owned.set(sessionId, { epoch: '', principal: principal ?? '' });
    if (lost) registry.keyLost(sessionId);
  }

  /**
   * `false` when another instance owns the session now: its record and events are not this
   * instance's to delete. Rejects when Redis did not take it; the engine calls it again then, and
   * it goes on where it stopped.
   */
  async end(sessionId: string): Promise<boolean> {
    // Out of `owned` at once, so no beat writes its owner record back, but still this instance's to release.
    if (this.owned.delete(sessionId)) remember(this.releasing, sessionId);
    else if (!this.releasing.has(sessionId)) return !this.takenAway.delete(sessionId);
    const released =
      (await this.fenced(sessionId, (force) => RELEASE.run(this.ctx.client, [this.ctx.keys.session(sessionId), this.me, '0', force]))) ===
      1;
    this.releasing.delete(sessionId);
    return released;
  }

  async saveRecord(sessionId: string, record: RestoreRecord, ttlMs: number): Promise<void> {
    const { client, keys } = this.ctx;
    const saved = encodeRecord(record);
    await this.fenced(sessionId, (force) => SAVE_RECORD.run(client, [keys.session(sessionId), this.me, saved, ttlMs, force]));
  }

  kept(): void {}

  /**
   * Takes over a session whose owner is gone or let it go, atomically (one Lua script), so of
   * several instances racing for it one wins and the others are told the winner.
   */
  async takeOver(sessionId: string, principal: string | undefined): Promise<TakeOver | undefined> {
    const { client, keys, registry } = this.ctx;
    // Redis lost its data moments ago: the session may live on an instance that has not written its
    // owner record back yet, though a restore record it saved since is there; taking the session
    // would make a second owner. A 503 its client retries, never a 404.
    if (await registry.dataJustLost(sessionId))
      throw new Error('Redis lost its data moments ago: the session may live on an instance that has not written its records back yet');
    // Read, then taken compare-and-set with every stream it registered named (one slot): a few tries if its owner changes meanwhile.
    for (let attempt = 0; attempt < 5; attempt++) {
      const session = sessionFields(await client.hgetall(keys.session(sessionId)));
      if (session.owner === undefined && session.record === undefined) {
        const moved = await this.moveOver(sessionId, principal);
        if (moved === 'again') continue;
        return moved;
      }
      if ((session.principal ?? '') !== (principal ?? '')) return { forbidden: true };
      if (session.owner === this.me) {
        if (session.record === undefined) return undefined;
        this.owned.set(sessionId, { epoch: session.epoch ?? '', principal: session.principal ?? '' });
        return { record: parseRecord(session.record), principal: session.principal };
      }
      if (session.owner !== undefined && (await registry.isAlive(session.owner)))
        return { owner: { instanceId: session.owner, self: false, principal: session.principal, address: session.url } };
      if (session.record === undefined) return undefined;
      const streams = session.streams.map((id) => keys.stream(sessionId, id));
      const args = [keys.session(sessionId), ...streams, this.me, registry.internalUrl, session.owner ?? ''];
      const epoch = await TAKE_OVER.run(client, args, 1 + streams.length);
      if (epoch === 0) continue;
      this.owned.set(sessionId, { epoch: String(epoch), principal: session.principal ?? '' });
      return { record: parseRecord(session.record), principal: session.principal };
    }
    throw new Error(`the owner of session ${sessionId} kept changing while this instance took it over`);
  }

  /**
   * A session of the keyspace before 0.2 (a rolling deploy from it): forwarded to while its old
   * owner beats; once it is gone, moved into the current keyspace as a take-over, and the old
   * owner record made to name this instance (an old instance that was away then forwards to it,
   * and its own fence stores nothing in the session). See legacy.ts.
   */
  private async moveOver(sessionId: string, principal: string | undefined): Promise<TakeOver | 'again' | undefined> {
    const { client, keys, registry } = this.ctx;
    const legacy = await readLegacy(client, keys, sessionId, true);
    if (!legacy.record) return undefined;
    if ((legacy.record.principal ?? '') !== (principal ?? '')) return { forbidden: true };
    if (legacy.owner && legacy.owner.instanceId !== this.me && (await registry.isAlive(legacy.owner.instanceId)))
      return { owner: { instanceId: legacy.owner.instanceId, self: false, principal, address: legacy.owner.url } };
    const streams = await legacyStreams(client, keys, sessionId);
    const streamKeys = streams.flatMap((id) => [keys.stream(sessionId, id), keys.legacy.requests(sessionId, id)]);
    const { record, ttlMs } = legacy.record;
    const args = [
      keys.session(sessionId),
      ...streamKeys,
      this.me,
      registry.internalUrl,
      encodeRecord(record),
      principal ?? '',
      ttlMs,
      ...streams,
    ];
    const epoch = await MOVE_OVER.run(client, args, 1 + streamKeys.length);
    if (epoch === 0) return 'again';
    this.owned.set(sessionId, { epoch: String(epoch), principal: principal ?? '' });
    const owner = JSON.stringify({ i: this.me, u: registry.internalUrl, p: principal ?? null, e: epoch });
    await Promise.all([client.set(keys.legacy.owner(sessionId), owner, 'PX', ttlMs), client.del(keys.legacy.record(sessionId))]);
    return { record, principal };
  }

  /** This instance let go of its copy (a drain, a cap, hibernation): its owner record goes, its record stays for the next instance. */
  async letGo(sessionId: string): Promise<void> {
    if (!this.owned.delete(sessionId)) return;
    await RELEASE.run(this.ctx.client, [this.ctx.keys.session(sessionId), this.me, '1', '0']);
  }

  /**
   * Nothing while the last beat is recent. After a gap of two beats (a pause, a partition: peers
   * count this instance gone after three), a fresh beat first: it lets go of every session a peer
   * took over meanwhile, before any of them serves again. Rejects when Redis cannot be asked:
   * serving blind could make two servers of one session.
   */
  confirmHeld(): Promise<void> | undefined {
    const { registry } = this.ctx;
    if (!registry.stale()) return undefined;
    return registry.beatAgain();
  }

  async lookupOwner(sessionId: string): Promise<SessionOwner | undefined> {
    const { client, keys, registry } = this.ctx;
    const [found, address, principal] = await client.hmget(keys.session(sessionId), 'o', 'u', 'p');
    if (!found) return this.legacyOwner(sessionId);
    const instanceId = found;
    const owner: SessionOwner = { instanceId, self: instanceId === this.me, principal: principal ?? undefined, address: address ?? '' };
    if (owner.self) return owner;
    return (await registry.isAlive(instanceId)) ? owner : undefined;
  }

  /** A session an instance of the version before 0.2 owns, while it beats (see legacy.ts). */
  private async legacyOwner(sessionId: string): Promise<SessionOwner | undefined> {
    const { client, keys, registry } = this.ctx;
    const { owner } = await readLegacy(client, keys, sessionId, false);
    if (!owner || owner.instanceId === this.me || !(await registry.isAlive(owner.instanceId))) return undefined;
    return { instanceId: owner.instanceId, self: false, principal: undefined, address: owner.url };
  }

  peers(): Promise<SessionOwner[]> {
    return this.ctx.registry.peers();
  }

  forward(owner: SessionOwner, request: ForwardedRequest, responder: CoreResponder): Promise<void> {
    if (!owner.address) return Promise.reject(new Error(`no internal URL for instance ${owner.instanceId}`));
    return this.forwarder.forward(owner.address, request, responder);
  }

  /** Whether a forwarded-by or handed-over-by header was signed by an instance of this cluster. */
  verifyHop(value: string, request: { method: string; sessionId: string | undefined }): boolean {
    return this.ctx.registry.hops.verify(value, request);
  }

  taken(sessionIds: string[]): void {
    // Taken back by the instance that took them over last, after Redis lost its data (see RECLAIM).
    for (const id of sessionIds) if (this.owned.has(id)) this.lose(id);
  }

  /**
   * After this instance's key was found gone (it was away, or Redis lost its data): each session it
   * owns is checked, compare-and-set, never written blind. A session a peer took over stays the
   * peer's, and this instance lets it go; one this instance takes back after a data loss is taken
   * from the instance that wrote it back first, which learns it from its taken set.
   */
  async beat({ all, checks, dataLost }: Beat): Promise<void> {
    if (!all) return;
    const { client, keys, registry } = this.ctx;
    // The sessions in the shards whose records are checked (all of them on one Redis).
    const ids = [...this.owned.keys()].filter(checks);
    for (let i = 0; i < ids.length; i += 1_000) {
      // A session released since is not written back. One script per session: each touches its own slot.
      const batch = ids.slice(i, i + 1_000).filter((id) => this.owned.has(id));
      const replies = await Promise.all(
        batch.map((id) => {
          const { epoch, principal } = this.owned.get(id)!;
          return RECLAIM.run(client, [keys.session(id), this.me, registry.internalUrl, epoch, dataLost(id), this.ownerTtlMs, principal]);
        }),
      );
      for (const [j, id] of batch.entries()) {
        const reply = replies[j];
        if (reply === 0) this.lose(id);
        else if (Array.isArray(reply)) {
          const taken = keys.taken(String(reply[1]));
          await client.multi().sadd(taken, id).pexpire(taken, this.ownerTtlMs).exec();
        }
      }
    }
  }

  tick(): void {}

  /** Gives up this instance's sessions at once (other instances answer 404): what the owner records still name it. */
  async close(): Promise<void> {
    this.forwarder.close();
    const { client, keys, registry } = this.ctx;
    // Sessions their clients deleted here whose release did not go through yet: a last try.
    await Promise.all([...this.releasing].map((id) => this.end(id).catch(() => {})));
    const owned = [...this.owned.keys()];
    this.owned.clear();
    for (let i = 0; i < owned.length; i += 1_000)
      await Promise.all(
        owned.slice(i, i + 1_000).map((id) => RELEASE_OWNED.run(client, [keys.session(id), registry.instanceId]).catch(() => {})),
      );
  }

  private get me(): string {
    return this.ctx.registry.instanceId;
  }

  /**
   * Runs a fenced script; when it finds no owner record, asks whether Redis lost its data since
   * this instance's records were written, and if so runs it again with `force` (see fence.ts);
   * if not, the session was ended or handed off on purpose: 0, not this instance's to write.
   */
  private async fenced(sessionId: string, run: (force: '0' | '1') => Promise<unknown>): Promise<unknown> {
    try {
      return await run('0');
    } catch (error) {
      if (refusalOf(error)?.code !== ScriptRefusal.NoOwner) throw error;
      return (await this.ctx.registry.dataLostSinceRecords(sessionId)) ? run('1') : 0;
    }
  }

  /** Another instance owns the session now: forget it here and tell the engine, which lets go of its copy. */
  private lose(sessionId: string): void {
    this.owned.delete(sessionId);
    remember(this.takenAway, sessionId);
    this.ctx.lost(sessionId);
  }
}
