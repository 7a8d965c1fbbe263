import type { RedisClient } from '../client.js';
import type { Keyspace } from '../keyspace.js';
import { isCluster } from '../redis-cluster.js';
import { keySlot } from '../slots.js';

/**
 * A part of Redis' data that is lost as one: everything on one Redis (or the primary Sentinel
 * names), or what one master of a Redis Cluster serves. A master that restarts empty and is master
 * again, or a failover to a replica that lagged, loses writes of its own slots only: a marker
 * elsewhere does not see it. So each shard has its own two keys, in a slot it serves:
 *
 * - this instance's presence (`<prefix>instance:<id>` on one Redis; `<prefix>{<tag>}:instance:<id>`
 *   on a Redis Cluster), written at each beat with `GET`: found gone, this instance's records in
 *   the shard may be gone too (it was away past its TTL, or the shard lost its data), and each is
 *   checked (see the forwarding mode's RECLAIM);
 * - its generation (`<prefix>generation`; `<prefix>{<tag>}:generation`), a random id without
 *   TTL made by the first instance to find it missing: a new one means the shard lost its data.
 *
 * On a Redis Cluster a shard is named by the hash tag of its master's lowest slot (`<tag>`: the
 * shortest decimal number whose slot that is), read from the slots the client last read. A
 * session belongs to the shard of its key's slot.
 */
export interface Shard {
  /** `''` on one Redis. */
  readonly tag: string;
  readonly presenceKey: string;
  readonly generationKey: string;
}

/** A decimal hash tag in each slot, found the first time it is asked for. */
const tags = new Map<number, string>();

/** The shortest decimal string whose slot is `slot`. */
export function tagOfSlot(slot: number): string {
  let tag = tags.get(slot);
  if (tag !== undefined) return tag;
  for (let n = 0; ; n++) {
    const candidate = String(n);
    if (keySlot(candidate) === slot) {
      tag = candidate;
      break;
    }
  }
  tags.set(slot, tag);
  return tag;
}

export class Shards {
  /** On a Redis Cluster: each master (`host:port`) and the tag of its lowest slot, as the slots were last read. */
  private masters = new Map<string, string>();
  /** The slots were read again since {@link masters} was computed (ioredis changes its slots array in place). */
  private stale = true;

  constructor(
    private readonly client: RedisClient,
    private readonly keys: Keyspace,
    private readonly instanceId: string,
  ) {
    if (isCluster(client)) client.on('refresh', this.onRefresh);
  }

  private readonly onRefresh = (): void => void (this.stale = true);

  /** Stops following the client's reads of its slots. */
  close(): void {
    this.client.off('refresh', this.onRefresh);
  }

  /** The shards there are now: one on one Redis; one per master serving slots on a Redis Cluster (none while its slots are not read). */
  all(): Shard[] {
    if (!isCluster(this.client)) return [this.shard('')];
    return [...new Set(this.masterTags().values())].map((tag) => this.shard(tag));
  }

  /** The shard that holds `sessionId`'s keys. */
  of(sessionId: string): Shard {
    if (!isCluster(this.client)) return this.shard('');
    const slot = keySlot(this.keys.session(sessionId));
    const master = this.client.slots[slot]?.[0];
    const tag = master === undefined ? undefined : this.masterTags().get(master);
    // Slots not read yet: the slot's own tag (a shard of its own until they are).
    return this.shard(tag ?? tagOfSlot(slot));
  }

  private shard(tag: string): Shard {
    return {
      tag,
      presenceKey: tag === '' ? this.keys.instance(this.instanceId) : this.keys.presence(tag, this.instanceId),
      generationKey: tag === '' ? this.keys.generation() : this.keys.shardGeneration(tag),
    };
  }

  /** Each master and its lowest slot's tag, computed again after the client read its slots again. */
  private masterTags(): Map<string, string> {
    const slots = isCluster(this.client) ? this.client.slots : [];
    if (!this.stale && this.masters.size > 0) return this.masters;
    this.stale = false;
    const lowest = new Map<string, number>();
    for (let slot = 0; slot < slots.length; slot++) {
      const master = slots[slot]?.[0];
      if (master !== undefined && !lowest.has(master)) lowest.set(master, slot);
    }
    this.masters = new Map([...lowest].map(([master, slot]) => [master, tagOfSlot(slot)]));
    return this.masters;
  }
}
