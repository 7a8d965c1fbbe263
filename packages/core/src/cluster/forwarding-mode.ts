import { sessionNotFound } from '../http/errors.js';
import { principalOf } from '../http/rules.js';
import { FORWARDED_HEADER } from '../ports/hops.js';
import type { CoreRequest, CoreResponder } from '../ports/http.js';
import type { JSONRPCMessage } from '../ports/mcp.js';
import type { Arrival } from '../session/arrivals.js';
import { LET_GO_FOR_MEMORY } from '../session/copy-rules.js';
import type { Session } from '../session/session.js';
import type { SessionEndReason } from '../telemetry/events.js';
import type { SessionRequest } from '../engine/cluster-port.js';
import { forwardOrTakeOver } from './forward.js';
import { Forwarding } from './forwarding.js';
import { fromPeer } from './from-peer.js';
import { handOver, servedWhileDraining } from './hand-over.js';
import { locate, takeOver } from './locate.js';
import { rejected, type ClusterMode, type Found } from './mode.js';
import { GONE } from './restore.js';
import { followRemote, watchOwner } from './remote-resume.js';

/**
 * Forwarding mode: a session has one owner, the instance that answered its `initialize` or took it
 * over (invariant: one-owner). A request for a session another instance owns is forwarded there,
 * and its answer relayed; a resume of its stream is followed here from the shared store. An owner
 * that is gone is taken over where the session's next request lands. A draining instance hands
 * its requests over to a live peer.
 */
export class ForwardingMode extends Forwarding implements ClusterMode {
  /** The owner answers the handshake; its record is saved after, for a take-over. */
  readonly recordFirst = false;

  get restoresAnywhere(): boolean {
    return this.directory.saveRecord !== undefined && this.owners.takeOver !== undefined;
  }

  get handsOff(): boolean {
    return this.directory.letGo !== undefined;
  }

  /** The owner's copy is the session: its close ends it, unless only a cap or hibernation let it go and its record restores it anywhere. */
  endsSession(reason: SessionEndReason): boolean {
    return !(LET_GO_FOR_MEMORY.has(reason) && this.restoresAnywhere);
  }

  copyMade(): void {}

  find(req: CoreRequest, sessionId: string): Promise<Found> {
    if (!fromPeer(this.owners, req, FORWARDED_HEADER)) return locate(this, req, sessionId);
    // Forwarded here as to the owner, but this instance just let the session go (a hand-off while
    // draining): never bounced on, it is taken over here from its record if it has one.
    if (!this.owners.takeOver) return Promise.resolve(rejected(sessionNotFound(GONE)));
    return takeOver(this, req, sessionId, principalOf(req.authInfo));
  }

  confirmHeld(): void | Promise<void> {
    // Back from a pause or a partition past its heartbeat window, this instance first lets go of
    // the sessions a peer took over meanwhile: a stale copy never serves (invariant: one-owner).
    return this.directory.confirmHeld?.();
  }

  async route(req: CoreRequest, res: CoreResponder, found: Found, request: SessionRequest, arrival: Arrival): Promise<Session | undefined> {
    const { ctx } = this;
    // Draining: the request goes to a peer, which restores the session once this instance let it
    // go; a DELETE ends the session where it is, and a request forwarded here as to the owner is
    // this instance's to serve.
    const local = found.kind === 'local' ? found.session : undefined;
    if (found.kind === 'moved' || (ctx.drain.started && !request.deleting && !servedWhileDraining(this, req))) {
      await arrival.elsewhere(() => handOver(this, req, res, request.body?.(), local));
      return undefined;
    }
    if (found.kind !== 'remote') return local;
    if (request.lastEventId !== undefined) {
      // Its owner's stream, followed here from the shared store; a cursor the store cannot replay is the owner's to answer.
      const polling = ctx.polling(ctx.versionOf(req, undefined));
      const watch = watchOwner(this.directory, this.owners);
      const followed = await arrival.elsewhere(() => followRemote(ctx, res, found, request.lastEventId!, polling, watch));
      if (followed !== 'refused') return undefined;
    }
    // Its owner serves it; an owner that is gone leaves it to be taken over and served here.
    return arrival.elsewhere(() => forwardOrTakeOver(this, req, res, found, request.body?.()));
  }

  /** Every message of a session's POST reaches its owner, which runs its calls. */
  routeMessages(_session: Session, messages: JSONRPCMessage[]): JSONRPCMessage[] {
    return messages;
  }

  async handOver(req: CoreRequest, res: CoreResponder, body: () => string): Promise<boolean> {
    if (servedWhileDraining(this, req)) return false;
    await handOver(this, req, res, body());
    return true;
  }

  endRelayed(retryMs: number): void {
    this.relays.endAll(retryMs);
  }

  async leave(retryMs: number): Promise<void> {
    // Requests still being handed over keep the cluster until they are answered (their relayed
    // streams end now, with the retry hint); only then does this instance leave it.
    this.relays.endAll(retryMs);
    while (this.handingOver.size > 0) await Promise.allSettled([...this.handingOver]);
  }
}
