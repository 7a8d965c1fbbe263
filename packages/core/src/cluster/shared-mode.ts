import { parseEventId, parseWaitingCursor, randomId } from '../events/ids.js';
import { sendRejection, unavailable, type Rejection } from '../http/errors.js';
import { header, principalOf } from '../http/rules.js';
import type { Restored } from '../ports/record.js';
import type { CoreRequest, CoreResponder } from '../ports/http.js';
import type { JSONRPCMessage } from '../ports/mcp.js';
import { AnswerTags } from '../session/answer-tags.js';
import type { Arrival } from '../session/arrivals.js';
import type { Session } from '../session/session.js';
import type { SessionEndReason } from '../telemetry/events.js';
import { asError } from '../util/errors.js';
import { withBriefRetries } from '../util/retry.js';
import type { SessionRequest } from '../engine/cluster-port.js';
import { rejected, type ClusterMode, type Found } from './mode.js';
import { followRemote, watchWriter } from './remote-resume.js';
import { restoreCopy } from './restore.js';
import { askWriterToEndLost, LOST_WRITER_WAITS, receiveShared, routeShared, Sharing } from './shared-copies.js';

/**
 * Shared mode: no owner; any instance serves any request with its own copy of the session,
 * restored from the record, which is the session (Redis is the only bus). A call runs where its
 * POST landed; what reaches another copy for it (an answer, a cancel) is passed on through the
 * cluster; a resume of a stream another copy writes is followed from the shared store. There is
 * no peer to hand a request to: a draining instance serves what still reaches it.
 */
export class SharedMode extends Sharing implements ClusterMode {
  readonly restoresAnywhere = true;
  /** The record is the session: the other copies know it once it is saved. */
  readonly recordFirst = true;
  readonly handsOff = true;

  constructor(...args: ConstructorParameters<typeof Sharing>) {
    super(...args);
    // What the client sent through another instance for a call running here.
    this.copies.onMessage((message) => receiveShared(this, message));
  }

  /** A copy is one of many: only its client's DELETE ends the session everywhere. */
  endsSession(reason: SessionEndReason): boolean {
    return reason === 'delete';
  }

  /** The server's requests carry this instance's id, for the client's answer to find the copy that asked. */
  copyMade(session: Session): void {
    session.server.answerTags = new AnswerTags(`${this.directory.instanceId ?? ''}~${randomId().slice(0, 8)}~`);
  }

  async find(req: CoreRequest, sessionId: string): Promise<Found> {
    const principal = principalOf(req.authInfo);
    let restored: Restored | undefined;
    try {
      const restore = () => this.copies.restore(sessionId, principal);
      // Restoring a copy only reads the session's record: a read that failed (a command timed out,
      // its connection was reset) is tried again before the 503 that ends an SDK client's call.
      restored = await withBriefRetries(restore);
    } catch (error) {
      this.ctx.options.onError(asError(error, 'cluster restore failed'));
      return rejected(unavailable('the session directory'));
    }
    // The calls of other copies run on; a resume learns their fate (cluster/remote-resume.ts).
    return restoreCopy(this.ctx, req, sessionId, restored);
  }

  confirmHeld(deleting: boolean): void | Promise<void> {
    // The check only drops copies of sessions deleted elsewhere meanwhile: a DELETE ends its copy
    // without it (ending a session twice is harmless), so that Redis being down does not keep the
    // session alive here; the end is owed to Redis until it takes it (invariant: stored-before-success).
    if (deleting) return undefined;
    return this.directory.confirmHeld?.();
  }

  async route(req: CoreRequest, res: CoreResponder, found: Found, request: SessionRequest, arrival: Arrival): Promise<Session | undefined> {
    if (found.kind !== 'local') return undefined;
    const cursor = request.lastEventId === undefined ? undefined : parseEventId(request.lastEventId);
    // A stream another copy of the session writes (or wrote) is followed through the store.
    if (cursor && !found.session.activeStream(cursor.streamId)) {
      const followed = await arrival.elsewhere(() => this.followCopy(req, res, found.session, cursor, request.lastEventId!));
      if (followed) return undefined;
    }
    return found.session;
  }

  /** Follows a stream another copy of `session` writes; asks that copy to end what the store lost. `false`: it is this copy's to answer. */
  private async followCopy(
    req: CoreRequest,
    res: CoreResponder,
    session: Session,
    cursor: { streamId: string; seq: number },
    lastEventId: string,
  ): Promise<boolean> {
    const { ctx } = this;
    const polling = ctx.polling(ctx.versionOf(req, session));
    const sessionId = session.sessionId as string;
    const watch = watchWriter(ctx, this.directory);
    if ((await followRemote(ctx, res, { sessionId }, lastEventId, polling, watch)) !== 'refused') return true;
    // The store cannot replay what the client missed: the copy that writes the stream answers its
    // requests in the store with an error, read from there.
    if (await askWriterToEndLost(this, sessionId, cursor.streamId, cursor.seq)) {
      return (await followRemote(ctx, res, { sessionId }, lastEventId, polling, watch)) !== 'refused';
    }
    // No answer yet: the writer may only be out of reach (it reconnects after the outage or the
    // failover that lost the stream, and finds the ask in its inbox once back). The client is sent
    // back to come later (engine/resume-later.ts) a few times before it hears the engine's 404/410,
    // which an SDK client counts as a failed reconnect.
    const { waits } = parseWaitingCursor(header(req.headers, 'last-event-id') ?? '');
    if (waits < LOST_WRITER_WAITS) {
      sendRejection(res, unavailable('the instance that writes this stream'));
      return true;
    }
    return false;
  }

  routeMessages(session: Session, messages: JSONRPCMessage[]): JSONRPCMessage[] | Promise<JSONRPCMessage[] | Rejection> {
    // Answers and cancels for a call running on another copy go there.
    const { here, posted } = routeShared(this, session, messages);
    return posted.length === 0 ? here : this.passedOn(here, posted);
  }

  /** Resolves once every message for another copy is kept for it; 503 if one could not be. */
  private async passedOn(here: JSONRPCMessage[], posted: Promise<void>[]): Promise<JSONRPCMessage[] | Rejection> {
    try {
      await Promise.all(posted);
    } catch (error) {
      this.ctx.options.onError(asError(error, 'cluster post failed'));
      return unavailable('the session directory');
    }
    return here;
  }

  /**
   * No peer to hand new work to, and any instance may serve it: it is served here (the load
   * balancer is to stop sending requests to a draining instance; a call still running at the
   * deadline ends with the lost-call error for its client).
   */
  async handOver(): Promise<boolean> {
    return false;
  }

  /** Nothing is relayed from other instances in shared mode. */
  endRelayed(): void {}

  async leave(): Promise<void> {}
}
