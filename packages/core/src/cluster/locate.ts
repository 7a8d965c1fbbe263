import { foreignPrincipal, sessionNotFound, unavailable } from '../http/errors.js';
import { checkProtocolVersion, header, principalOf } from '../http/rules.js';
import type { SessionOwner, TakeOver } from '../ports/cluster.js';
import type { CoreRequest } from '../ports/http.js';
import { asError } from '../util/errors.js';
import { withBriefRetries } from '../util/retry.js';
import type { EngineContext } from '../engine/context.js';
import { rejected, type SessionResolution } from '../engine/cluster-port.js';
import { answerLostCalls } from './lost-calls.js';

const GONE = 'it expired, was deleted, or the server instance that held it is gone';

/**
 * Asks the cluster who owns a session this instance does not hold: another live instance (the
 * request is forwarded there, or a resume is served here from the shared store), or nobody. A
 * session nobody owns any more (its instance crashed, or handed it off while draining) is
 * restored here from the record its owner left, when the cluster keeps one; otherwise 404, and
 * the client initializes again.
 */
export async function locate(ctx: EngineContext, req: CoreRequest, sessionId: string): Promise<SessionResolution> {
  const cluster = ctx.options.cluster!;
  const principal = principalOf(req.authInfo);
  // Shared: nobody owns a session; every instance serves it from its record.
  if (cluster.shared) return restore(ctx, req, sessionId, principal);
  let owner: SessionOwner | undefined;
  try {
    owner = await withBriefRetries(() => cluster.lookupOwner(sessionId));
  } catch (error) {
    ctx.options.onError(asError(error, 'cluster lookupOwner failed'));
    return rejected(unavailable('the session directory'));
  }
  if (owner && !owner.self) return remote(req, sessionId, owner, principal, ctx);
  if (!cluster.takeOver) return rejected(sessionNotFound(GONE));
  return restore(ctx, req, sessionId, principal);
}

/** Takes the session over from the record its gone owner left; of racing instances one wins, the others forward to it. */
export async function restore(
  ctx: EngineContext,
  req: CoreRequest,
  sessionId: string,
  principal: string | undefined,
): Promise<SessionResolution> {
  // A draining instance takes nothing over: a peer will (shared: nobody takes anything over).
  if (ctx.draining && !ctx.options.cluster!.shared) return { kind: 'moved' };
  const cluster = ctx.options.cluster!;
  let taken: TakeOver | undefined;
  try {
    const take = () => cluster.takeOver!(sessionId, principal);
    // Shared, taking a copy only reads the session's record: a read that failed (a command timed
    // out, its connection was reset) is tried again before the 503 that ends an SDK client's call,
    // as an owner lookup is. Forwarding, the take-over is a compare-and-set that may have happened.
    taken = await (cluster.shared ? withBriefRetries(take) : take());
  } catch (error) {
    ctx.options.onError(asError(error, 'cluster takeOver failed'));
    return rejected(unavailable('the session directory'));
  }
  if (taken === undefined) return rejected(sessionNotFound(GONE));
  if ('forbidden' in taken) return rejected(foreignPrincipal());
  if ('owner' in taken) return remote(req, sessionId, taken.owner, principal, ctx);
  const version = checkProtocolVersion(header(req.headers, 'mcp-protocol-version'), ctx.supportedVersions);
  if (!version.ok) return rejected(version);
  // Requests for the session racing here: the first adopts it, the others find it.
  let session = ctx.registry.get(sessionId);
  if (!session) {
    session = ctx.registry.adopt(sessionId, taken.principal, taken.record);
    // Shared: the calls of other copies run on; a resume learns their fate (cluster/remote-resume.ts).
    if (!ctx.options.cluster!.shared) {
      const adopted = session;
      adopted.arrivals.adopting = answerLostCalls(ctx, adopted).finally(() => (adopted.arrivals.adopting = undefined));
    }
  }
  await session.arrivals.adopting;
  session.touch();
  return { kind: 'local', session };
}

function remote(
  req: CoreRequest,
  sessionId: string,
  owner: SessionOwner,
  principal: string | undefined,
  ctx: EngineContext,
): SessionResolution {
  if (owner.principal !== undefined && owner.principal !== principal) return rejected(foreignPrincipal());
  const version = checkProtocolVersion(header(req.headers, 'mcp-protocol-version'), ctx.supportedVersions);
  if (!version.ok) return rejected(version);
  return { kind: 'remote', sessionId, owner };
}
