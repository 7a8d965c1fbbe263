import type { SessionCluster } from '../ports/cluster.js';
import type { EngineContext } from '../engine/context.js';
import { Relays } from './relayed-streams.js';

/**
 * What the cluster layer keeps beside the engine's context: the `ClusterLayer` is one, and its
 * functions (forward.ts, hand-over.ts, shared-copies.ts) take it without importing the layer back.
 */
export class ClusterState {
  readonly cluster: SessionCluster;
  /** Streams relayed from other instances (ended apart by a drain, or when their peer goes silent). */
  readonly relays: Relays;
  /** Requests handed over while draining, to spread them over the peers. */
  handOvers = 0;
  /** Requests being handed over to peers now: close() lets them finish before it leaves the cluster. */
  readonly handingOver = new Set<Promise<void>>();
  /** Shared cluster: resumes waiting for a stream's writer to answer the requests the store lost (shared-copies.ts). */
  readonly lostEventsAnswered = new Map<string, Set<() => void>>();

  constructor(readonly ctx: EngineContext) {
    this.cluster = ctx.options.cluster!;
    // A peer writes a keep-alive on a stream idle keepAliveMs: twice that in silence, it is frozen or cut off.
    this.relays = new Relays(ctx.options.keepAliveMs * 2, ctx.options.retryMs);
  }
}
