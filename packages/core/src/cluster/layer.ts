import { ErrorCode, reject, sendRejection, sessionNotFound, unavailable, type Rejection } from '../http/errors.js';
import type { SessionCluster } from '../ports/cluster.js';
import type { CoreRequest, CoreResponder } from '../ports/http.js';
import type { JSONRPCMessage } from '../ports/mcp.js';
import type { Arrival } from '../session/arrivals.js';
import type { Session } from '../session/session.js';
import { asError, settle } from '../util/errors.js';
import { OWNERSHIP_RECHECKS_MS, withBriefRetries } from '../util/retry.js';
import type { ClusterPort, SessionRequest } from '../engine/cluster-port.js';
import type { EngineContext } from '../engine/context.js';
import { checkUse, sessionIdOf } from '../engine/resolve.js';
import { ForwardingMode } from './forwarding-mode.js';
import { rejected, type ClusterMode, type Found } from './mode.js';
import { SharedMode } from './shared-mode.js';

/**
 * The cluster layer: what the engine asks through its {@link ClusterPort}, for the mode the
 * handler's `SessionCluster` runs: forwarding (it gives `owners`) or shared (it gives `copies`).
 * The mode is picked once, here, as a strategy ({@link ClusterMode}); what both modes do alike
 * (finding the session a request names, the directory's calls) is this class's.
 */
export class ClusterLayer implements ClusterPort {
  private readonly cluster: SessionCluster;
  private readonly mode: ClusterMode;

  constructor(private readonly ctx: EngineContext) {
    this.cluster = ctx.options.cluster!;
    const { directory, owners, copies } = this.cluster;
    // Exactly one of them (resolveOptions checks it): the mode, chosen once.
    this.mode = copies ? new SharedMode(ctx, directory, copies) : new ForwardingMode(ctx, directory, owners!);
    ctx.registry.join(this.mode);
    // A copy this instance must let go of (a peer took the session over while this instance was
    // away, or it was deleted meanwhile) is dropped at once; nothing stored is deleted (invariant: one-owner).
    directory.onLetGo?.((sessionId) => {
      const session = ctx.registry.get(sessionId);
      if (session) void ctx.registry.letGo(session, ctx.options.retryMs);
    });
  }

  get handsOff(): boolean {
    return this.mode.handsOff;
  }

  async serve(
    req: CoreRequest,
    res: CoreResponder,
    request: SessionRequest,
    arrival: Arrival,
    here: (session: Session) => Promise<void>,
  ): Promise<void> {
    const found = await this.find(req, request.deleting === true);
    if (found.kind === 'rejected') return sendRejection(res, found.rejection);
    const refused = request.check?.();
    if (refused) return sendRejection(res, refused);
    const session = await this.mode.route(req, res, found, request, arrival);
    // Until its stream is open the session looks idle: it is not let go of meanwhile.
    if (session) await session.arrivals.visit(() => here(session));
  }

  /**
   * Where the session a request names is: held here (checked first by the mode: a copy held here
   * may be stale after this instance was away), or wherever the mode finds it. One check per
   * request: after a gap that is not over yet, the cluster would ask for another at once, and the
   * request would never be served.
   */
  private find(req: CoreRequest, deleting: boolean, confirmed = false): Found | Promise<Found> {
    const id = sessionIdOf(req);
    if (typeof id !== 'string') return rejected(id);
    const session = this.ctx.registry.get(id);
    if (!session) {
      // Its client deleted it here, and Redis has not taken that yet: gone all the same, never
      // restored from the record still there (a peer forwards here while the owner record names this instance).
      if (this.ctx.registry.ends.deletedHere(id)) return rejected(sessionNotFound());
      return this.mode.find(req, id);
    }
    const checking = confirmed ? undefined : this.mode.confirmHeld(deleting);
    if (checking) return this.afterCheck(req, checking, deleting);
    const used = checkUse(this.ctx, req, session);
    return 'ok' in used ? rejected(used) : { kind: 'local', session };
  }

  /** Finds the session again once the cluster knows which copies held here are still this instance's to serve. */
  private async afterCheck(req: CoreRequest, checking: Promise<void>, deleting: boolean): Promise<Found> {
    for (let i = 0; ; i++) {
      try {
        await checking;
        break;
      } catch (error) {
        if (i === OWNERSHIP_RECHECKS_MS.length) {
          this.ctx.options.onError(asError(error, 'cluster ownership check failed'));
          return rejected(unavailable('the session directory'));
        }
      }
      await new Promise((resolve) => setTimeout(resolve, OWNERSHIP_RECHECKS_MS[i]));
      const again = this.mode.confirmHeld(deleting);
      if (!again) break;
      checking = again;
    }
    return this.find(req, deleting, true);
  }

  routeMessages(session: Session, messages: JSONRPCMessage[]): JSONRPCMessage[] | Promise<JSONRPCMessage[] | Rejection> {
    return this.mode.routeMessages(session, messages);
  }

  async open(session: Session): Promise<void> {
    // Tried again at once on a blip.
    const claiming = () => this.cluster.directory.open(session.sessionId as string, session.principal);
    await withBriefRetries(claiming);
  }

  async admit(holder: string | undefined, sessionId: string): Promise<Rejection | undefined> {
    const directory = this.cluster.directory;
    if (holder === undefined || !directory.admitSession) return undefined;
    const admit = () => directory.admitSession!(holder, sessionId, this.ctx.options.sessionIdleTtlMs);
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
    const directory = this.cluster.directory;
    if (holder === undefined || !directory.releaseAdmission) return;
    settle(() => directory.releaseAdmission!(holder, sessionId), this.ctx.options.onError, 'cluster releaseAdmission failed');
  }

  handOver(req: CoreRequest, res: CoreResponder, body: () => string): Promise<boolean> {
    return this.mode.handOver(req, res, body);
  }

  endRelayed(retryMs: number): void {
    this.mode.endRelayed(retryMs);
  }

  leave(retryMs: number): Promise<void> {
    return this.mode.leave(retryMs);
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
