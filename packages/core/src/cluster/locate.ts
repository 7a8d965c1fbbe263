import { foreignPrincipal, sessionNotFound, unavailable } from '../http/errors.js';
import { checkProtocolVersion, header, principalOf } from '../http/rules.js';
import type { SessionOwner, TakeOver } from '../ports/owners.js';
import type { CoreRequest } from '../ports/http.js';
import { asError } from '../util/errors.js';
import { withBriefRetries } from '../util/retry.js';
import type { EngineContext } from '../engine/context.js';
import type { Forwarding } from './forwarding.js';
import { answerLostCalls } from './lost-calls.js';
import { rejected, type Found } from './mode.js';
import { GONE, restoreCopy } from './restore.js';

/**
 * Forwarding: asks who owns a session this instance does not hold: another live instance (the
 * request is forwarded there, or a resume is served here from the shared store), or nobody. A
 * session nobody owns any more (its instance crashed, or let it go while draining) is taken over
 * here from the record its owner left, when the cluster keeps one; otherwise 404, and the client
 * initializes again.
 */
export async function locate(state: Forwarding, req: CoreRequest, sessionId: string): Promise<Found> {
  const { ctx, owners } = state;
  const principal = principalOf(req.authInfo);
  let owner: SessionOwner | undefined;
  try {
    owner = await withBriefRetries(() => owners.lookupOwner(sessionId));
  } catch (error) {
    ctx.options.onError(asError(error, 'cluster lookupOwner failed'));
    return rejected(unavailable('the session directory'));
  }
  if (owner && !owner.self) return remote(req, sessionId, owner, principal, ctx);
  if (!owners.takeOver) return rejected(sessionNotFound(GONE));
  return takeOver(state, req, sessionId, principal);
}

/**
 * Takes the session over from the record its gone owner left, and restores it here; of racing
 * instances one wins, the others forward to it. The calls the gone owner was running are answered
 * with the lost-call error before any request is served on the copy.
 */
export async function takeOver(state: Forwarding, req: CoreRequest, sessionId: string, principal: string | undefined): Promise<Found> {
  const { ctx, owners } = state;
  // A draining instance takes nothing over: a peer will.
  if (ctx.drain.started) return { kind: 'moved' };
  let taken: TakeOver | undefined;
  try {
    // A compare-and-set that may have happened: never tried again blind.
    taken = await owners.takeOver!(sessionId, principal);
  } catch (error) {
    ctx.options.onError(asError(error, 'cluster takeOver failed'));
    return rejected(unavailable('the session directory'));
  }
  if (taken !== undefined && 'owner' in taken) return remote(req, sessionId, taken.owner, principal, ctx);
  return restoreCopy(ctx, req, sessionId, taken, (session) => answerLostCalls(ctx, session));
}

function remote(req: CoreRequest, sessionId: string, owner: SessionOwner, principal: string | undefined, ctx: EngineContext): Found {
  if (owner.principal !== undefined && owner.principal !== principal) return rejected(foreignPrincipal());
  const version = checkProtocolVersion(header(req.headers, 'mcp-protocol-version'), ctx.supportedVersions);
  if (!version.ok) return rejected(version);
  return { kind: 'remote', sessionId, owner };
}
