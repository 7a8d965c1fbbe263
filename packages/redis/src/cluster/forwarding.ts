import type { ClusterMessage, CoreResponder, ForwardedRequest, RestoreRecord, SessionOwner, TakeOver } from '@mcp-kit/core';
import { HttpForwarder, type ForwarderOptions } from '../forward.js';
import { RECLAIM, RELEASE, RELEASE_OWNED, SAVE_RECORD, TAKE_OVER } from './owner-scripts.js';
import type { Beat } from './registry.js';
import { remember, type ClusterContext, type ClusterStrategy } from './strategy.js';

interface OwnerRecord {
  /** instance id */
  i: string;
  /** internal URL */
  u: string;
  /** principal */
  p: string | null;
}

/**
 * The forwarding mode (`internalUrl`): each session has an owner, the instance that answered its
 * `initialize` or took it over, named by its owner record (`<prefix>owner:<id>`); the others
 * forward its requests there over HTTP. What this instance holds: the owner records it wrote
 * (written back at a beat after Redis lost them, checked after a pause), the sessions a peer took
 * over while it was away, and the releases Redis has not taken yet.
 */
export class Owners implements ClusterStrategy {
  readonly shared = false;
  private readonly owned = new Map<string, { record: string; refreshedAt: number }>();
  /** Sessions taken over by another instance while this one was away, until the engine lets them go. */
  private readonly lostHere = new Set<string>();
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

  async claim(sessionId: string, principal: string | undefined): Promise<void> {
    const { client, keys, registry } = this.ctx;
    const record = JSON.stringify({ i: registry.instanceId, u: registry.internalUrl, p: principal ?? null } satisfies OwnerRecord);
    const results = await client
      .pipeline()
      .set(...registry.instanceKeyArgs())
      .set(keys.owner(sessionId), record, 'PX', this.ownerTtlMs)
      .exec();
    for (const [error] of results ?? []) if (error) throw error;
    const lost = results?.[0]?.[1] === null && this.owned.size > 0;
    this.owned.set(sessionId, { record, refreshedAt: Date.now() });
    if (lost) registry.keyLost();
  }

  /**
   * `false` when another instance owns the session now: its record and events are not this
   * instance's to delete. Rejects when Redis did not take it; the engine calls it again then, and
   * it goes on where it stopped.
   */
  async release(sessionId: string): Promise<boolean> {
    // Out of `owned` at once, so no beat writes its owner record back, but still this instance's to release.
    if (this.owned.delete(sessionId)) remember(this.releasing, sessionId);
    else if (!this.releasing.has(sessionId)) return !this.lostHere.delete(sessionId);
    const { client, keys, registry } = this.ctx;
    const released =
      (await RELEASE.run(client, [
        keys.owner(sessionId),
        keys.record(sessionId),
        keys.generation(),
        registry.instanceId,
        registry.fenceGeneration,
      ])) === 1;
    this.releasing.delete(sessionId);
    return released;
  }

  async saveRecord(sessionId: string, record: RestoreRecord, ttlMs: number): Promise<void> {
    const { client, keys, registry } = this.ctx;
    const owned = this.owned.get(sessionId);
    const principal = owned ? (JSON.parse(owned.record) as OwnerRecord).p : null;
    const saved = JSON.stringify({ p: principal, r: record });
    await SAVE_RECORD.run(client, [
      keys.owner(sessionId),
      keys.record(sessionId),
      keys.generation(),
      registry.instanceId,
      saved,
      ttlMs,
      registry.fenceGeneration,
    ]);
  }

  kept(): void {}

  /**
   * Takes over a session whose owner is gone or handed it off, atomically (one Lua script), so of
   * several instances racing for it one wins and the others are told the winner.
   */
  async takeOver(sessionId: string, principal: string | undefined): Promise<TakeOver | undefined> {
    const { client, keys, registry } = this.ctx;
    // Redis lost its data moments ago: the session may live on an instance that has not written its
    // owner record back yet, though a restore record it saved since is there; taking the session
    // would make a second owner. A 503 its client retries, never a 404.
    if (await registry.dataJustLost())
      throw new Error('Redis lost its data moments ago: the session may live on an instance that has not written its records back yet');
    const reply = (await TAKE_OVER.run(client, [
      keys.owner(sessionId),
      keys.record(sessionId),
      registry.instanceId,
      registry.internalUrl,
      principal ?? '',
      keys.instance(''),
      this.ownerTtlMs,
    ])) as [number, string?, string?];
    if (reply[0] === 0) return undefined;
    if (reply[0] === 1) return { forbidden: true };
    if (reply[0] === 3) {
      const owner = JSON.parse(reply[1]!) as OwnerRecord;
      return { owner: { instanceId: owner.i, self: false, principal: owner.p ?? undefined, address: owner.u } };
    }
    const saved = JSON.parse(reply[1]!) as { p: string | null; r: RestoreRecord };
    const record = reply[2] ?? JSON.stringify({ i: registry.instanceId, u: registry.internalUrl, p: saved.p } satisfies OwnerRecord);
    this.owned.set(sessionId, { record, refreshedAt: Date.now() });
    return { record: saved.r, principal: saved.p ?? undefined };
  }

  /** Lets go of a session (draining): its owner record goes, its restore record stays for the next instance. */
  async handOff(sessionId: string): Promise<void> {
    if (!this.owned.delete(sessionId)) return;
    const { client, keys, registry } = this.ctx;
    await RELEASE.run(client, [keys.owner(sessionId), '', keys.generation(), registry.instanceId, registry.fenceGeneration]);
  }

  /**
   * Nothing while the last beat is recent. After a gap of two beats (a pause, a partition: peers
   * count this instance gone after three), a fresh beat first: it lets go of every session a peer
   * took over meanwhile, before any of them serves again. Rejects when Redis cannot be asked:
   * serving blind could make two servers of one session.
   */
  confirmOwnership(): Promise<void> | undefined {
    const { registry } = this.ctx;
    if (!registry.stale()) return undefined;
    return registry.beatAgain();
  }

  async lookupOwner(sessionId: string): Promise<SessionOwner | undefined> {
    const { client, keys, registry } = this.ctx;
    const raw = await client.get(keys.owner(sessionId));
    if (raw === null) return undefined;
    let record: OwnerRecord;
    try {
      record = JSON.parse(raw) as OwnerRecord;
    } catch {
      return undefined;
    }
    const owner: SessionOwner = {
      instanceId: record.i,
      self: record.i === registry.instanceId,
      principal: record.p ?? undefined,
      address: record.u,
    };
    if (owner.self) return owner;
    return (await registry.isAlive(record.i)) ? owner : undefined;
  }

  peers(): Promise<SessionOwner[]> {
    return this.ctx.registry.peers();
  }

  forward(owner: SessionOwner, request: ForwardedRequest, responder: CoreResponder): Promise<void> {
    if (!owner.address) return Promise.reject(new Error(`no internal URL for instance ${owner.instanceId}`));
    return this.forwarder.forward(owner.address, request, responder);
  }

  post(_to: string, _message: ClusterMessage): Promise<void> {
    return Promise.reject(new Error('mcp-kit: a forwarding cluster has no bus (a shared cluster does)'));
  }

  onMessage(): void {}

  taken(sessionIds: string[]): void {
    // Taken back by the instance that took them over last, after Redis lost its data (see RECLAIM).
    for (const id of sessionIds) if (this.owned.has(id)) this.letGo(id);
  }

  /**
   * Writes back the owner records due (all of them after this instance's key was found gone, else
   * those at half their TTL), compare-and-set, never blind: a session a peer took over stays the
   * peer's, and this instance lets it go.
   */
  async beat({ all, dataLost, now }: Beat): Promise<void> {
    const { client, keys, registry } = this.ctx;
    const due = [...this.owned].filter(([, o]) => all || now - o.refreshedAt > this.ownerTtlMs / 2);
    for (let i = 0; i < due.length; i += 1_000) {
      // A session released since is not written back.
      const batch = due.slice(i, i + 1_000).filter(([id]) => this.owned.has(id));
      const args = batch.flatMap(([id, o]) => [id, o.record]);
      const script = [registry.instanceId, this.ownerTtlMs, keys.owner(''), dataLost, keys.taken(''), ...args];
      const lost = (await RECLAIM.run(client, script)) as string[];
      for (const [, o] of batch) o.refreshedAt = now;
      for (const id of lost) this.letGo(id);
    }
  }

  tick(): void {}

  /** Gives up this instance's sessions at once (other instances answer 404): what the owner records still name it. */
  async close(): Promise<void> {
    this.forwarder.close();
    const { client, keys, registry } = this.ctx;
    // Sessions their clients deleted here whose release did not go through yet: a last try.
    await Promise.all([...this.releasing].map((id) => this.release(id).catch(() => {})));
    const owned = [...this.owned.keys()];
    this.owned.clear();
    for (let i = 0; i < owned.length; i += 1_000)
      await RELEASE_OWNED.run(client, [registry.instanceId, keys.owner(''), ...owned.slice(i, i + 1_000)]).catch(() => {});
  }

  /** Another instance owns the session now: forget it here and tell the engine, which drops its copy. */
  private letGo(sessionId: string): void {
    this.owned.delete(sessionId);
    remember(this.lostHere, sessionId);
    this.ctx.lost(sessionId);
  }
}
