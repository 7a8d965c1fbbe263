import type { SessionDirectory } from '../ports/cluster.js';
import type { SessionOwners } from '../ports/owners.js';
import type { EngineContext } from '../engine/context.js';
import { Relays } from './relayed-streams.js';

/**
 * What forwarding mode keeps beside the engine's context: the `ForwardingMode` is one, and the
 * functions it is made of (locate.ts, forward.ts, hand-over.ts) take it without importing the mode back.
 */
export class Forwarding {
  /** Streams relayed from other instances (ended apart by a drain, or when their peer goes silent). */
  readonly relays: Relays;
  /** Requests handed over while draining so far: the next goes to the next peer. */
  handedOver = 0;
  /** Requests being handed over to peers now: close() lets them finish before it leaves the cluster. */
  readonly handingOver = new Set<Promise<void>>();

  constructor(
    readonly ctx: EngineContext,
    readonly directory: SessionDirectory,
    readonly owners: SessionOwners,
  ) {
    // A peer writes a keep-alive on a stream idle keepAliveMs: twice that in silence, it is frozen or cut off.
    this.relays = new Relays(ctx.options.keepAliveMs * 2, ctx.options.retryMs);
  }
}
