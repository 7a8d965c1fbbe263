import { ErrorCode, reject, sendRejection, sessionNotFound, unavailable, type Rejection } from '../http/errors.js';
import { header, principalOf } from '../http/rules.js';
import { parseEventId, parseWaitingCursor } from '../events/ids.js';
import { FORWARDED_HEADER, type SessionOwner } from '../ports/cluster.js';
import type { CoreRequest, CoreResponder } from '../ports/http.js';
import type { JSONRPCMessage } from '../ports/mcp.js';
import type { Session } from '../session/session.js';
import { asError, settle } from '../util/errors.js';
import { withBriefRetries } from '../util/retry.js';
import { rejected, type ClusterPort, type SessionResolution } from '../engine/cluster-port.js';
import type { EngineContext } from '../engine/context.js';
import { forwardOrTakeOver } from './forward.js';
import { fromPeer } from './from-peer.js';
import { handOver, servedWhileDraining } from './hand-over.js';
import { locate, restore } from './locate.js';
import { followRemote } from './remote-resume.js';
import { askWriterToEndLost, LOST_WRITER_WAITS, receiveShared, routeShared } from './shared-copies.js';
import { ClusterState } from './state.js';

/**
 * The cluster layer: what the engine asks through its {@link ClusterPort}, served for either mode
 * of `options.cluster`: forwarding (a session has one owner; peers forward its requests there and
 * follow its streams from the shared store) or shared (`cluster.shared`: any instance serves a
 * copy restored from the record; Redis is the only bus). Where the two modes differ, the branch
 * is here, not in the verbs.
 */
export class ClusterLayer extends ClusterState implements ClusterPort {
  constructor(ctx: EngineContext) {
    super(ctx);
    const { options } = ctx;
    // A session another instance took over while this one was away is dropped here at once, as a
    // hand-off (nothing stored is deleted): one session, one server (issue 20, item 1).
    this.cluster.onLost?.((sessionId) => {
      const session = ctx.registry.get(sessionId);
      if (session) void ctx.registry.handOff(session, options.retryMs);
    });
    // A shared cluster: what the client sent through another instance for a call running here.
    if (this.cluster.shared) this.cluster.onMessage?.((message) => receiveShared(this, message));
  }

  get handsOff(): boolean {
    return this.cluster.handOff !== undefined;
  }

  find(req: CoreRequest, sessionId: string): Promise<SessionResolution> {
    if (!fromPeer(this.cluster, req, FORWARDED_HEADER)) return locate(this.ctx, req, sessionId);
    // Forwarded here as to the owner, but this instance just let the session go (a hand-off while
    // draining): never bounced on, it is restored here from its record if it has one.
    if (!this.cluster.takeOver) return Promise.resolve(rejected(sessionNotFound()));
    return restore(this.ctx, req, sessionId, principalOf(req.authInfo));
  }

  confirmHeld(deleting: boolean): void | Promise<void> {
    // Back from a pause or a partition past its heartbeat window, this instance first drops the
    // sessions a peer took over meanwhile: a stale copy never serves (issue 20, item 1).
    // A shared cluster's check only drops copies of sessions deleted elsewhere meanwhile: a DELETE
    // ends its copy without it (ending a session twice is harmless), so that Redis being down does
    // not keep the session alive here; the end is owed to Redis until it takes it (issue 27, item 3).
    if (deleting && this.cluster.shared) return undefined;
    return this.cluster.confirmOwnership?.();
  }

  serveElsewhere(
    req: CoreRequest,
    res: CoreResponder,
    remote: { sessionId: string; owner: SessionOwner },
    body: string | undefined,
  ): Promise<Session | undefined> {
    return forwardOrTakeOver(this, req, res, remote, body);
  }

  resumeElsewhere(req: CoreRequest, res: CoreResponder, found: SessionResolution, lastEventId: string): boolean | Promise<boolean> {
    const { ctx } = this;
    // Forwarding: another instance's session is followed here, from the shared store.
    if (found.kind === 'remote') {
      const polling = ctx.polling(ctx.versionOf(req, undefined));
      return followRemote(ctx, res, found, lastEventId, polling).then((followed) => followed !== 'refused');
    }
    // Shared: a stream another copy of the session writes (or wrote) is followed through the store.
    if (found.kind !== 'local' || !this.cluster.shared) return false;
    const cursor = parseEventId(lastEventId);
    if (cursor === undefined || found.session.activeStream(cursor.streamId)) return false;
    return this.followCopy(req, res, found.session, cursor, lastEventId);
  }

  /** Shared: follows a stream another copy of `session` writes; asks that copy to end what the store lost. */
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
    if ((await followRemote(ctx, res, { sessionId }, lastEventId, polling)) !== 'refused') return true;
    // The store cannot replay what the client missed: the copy that writes the stream answers its
    // requests in the store with an error, read from there.
    if (await askWriterToEndLost(this, sessionId, cursor.streamId, cursor.seq)) {
      return (await followRemote(ctx, res, { sessionId }, lastEventId, polling)) !== 'refused';
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
    // Forwarding: every message of a session's POST reaches its owner, which runs its calls.
    if (!this.cluster.shared || !this.cluster.post) return messages;
    // Shared: answers and cancels for a call running on another instance go there.
    const { here, posted } = routeShared(this.ctx, session, messages);
    return posted.length === 0 ? here : this.passedOn(here, posted);
  }

  /** Resolves once every message for another instance is kept for it; 503 if one could not be. */
  private async passedOn(here: JSONRPCMessage[], posted: Promise<void>[]): Promise<JSONRPCMessage[] | Rejection> {
    try {
      await Promise.all(posted);
    } catch (error) {
      this.ctx.options.onError(asError(error, 'cluster post failed'));
      return unavailable('the session directory');
    }
    return here;
  }

  async claim(session: Session): Promise<void> {
    // Tried again at once on a blip.
    const claiming = () => this.cluster.claim(session.sessionId as string, session.principal);
    await withBriefRetries(claiming);
  }

  async admit(holder: string | undefined, sessionId: string): Promise<Rejection | undefined> {
    const cluster = this.cluster;
    if (holder === undefined || !cluster.admitSession) return undefined;
    const admit = () => cluster.admitSession!(holder, sessionId, this.ctx.options.sessionIdleTtlMs);
    let waitMs: number;
    try {
      // Counting the same new session twice is harmless (a sorted set's member): tried again at once on a blip.
      waitMs = await withBriefRetries(admit);
    } catch (error) {
      this.ctx.options.onError(asError(error, 'cluster admitSession failed'));
      return unavailable('the session directory');
    }
    return waitMs > 0 ? quotaReached(waitMs) : undefined;
  }

  dismiss(holder: string | undefined, sessionId: string): void {
    const cluster = this.cluster;
    if (holder === undefined || !cluster.releaseAdmission) return;
    settle(() => cluster.releaseAdmission!(holder, sessionId), this.ctx.options.onError, 'cluster releaseAdmission failed');
  }

  servedWhileDraining(req: CoreRequest): boolean {
    return servedWhileDraining(this, req);
  }

  handOver(req: CoreRequest, res: CoreResponder, body: string | undefined, session?: Session): Promise<void> {
    return handOver(this, req, res, body, session);
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

/**
 * What a client past its quota of sessions in the deployment hears: 429 (RFC 6585), and when it
 * may open one again. An SDK client's `connect` fails with it; the client's own sessions go on.
 */
function quotaReached(waitMs: number): Rejection {
  const message =
    'Too Many Requests: this client has opened as many sessions as it may for now; delete the sessions it no longer uses, or retry later';
  return reject(429, ErrorCode.ServerError, message, { 'retry-after': String(Math.ceil(waitMs / 1000)) });
}
