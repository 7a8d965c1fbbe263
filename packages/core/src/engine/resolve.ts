import { foreignPrincipal, reject, sessionNotFound, unavailable, ErrorCode, type Rejection } from '../http/errors.js';
import { checkProtocolVersion, header, principalOf } from '../http/rules.js';
import { FORWARDED_HEADER, type SessionOwner } from '../ports/cluster.js';
import { fromPeer } from '../cluster/from-peer.js';
import type { CoreRequest } from '../ports/http.js';
import { locate, restore } from '../cluster/locate.js';
import type { Session } from '../session/session.js';
import { asError } from '../util/errors.js';
import type { EngineContext } from './context.js';

/** Where the session a request names lives: here, on another instance of the cluster, or nowhere it may use. */
export type SessionResolution =
  | { kind: 'local'; session: Session }
  | { kind: 'remote'; sessionId: string; owner: SessionOwner }
  /** Not here, and this instance is draining: it takes no session over; the request goes to a peer. */
  | { kind: 'moved' }
  | { kind: 'rejected'; rejection: Rejection };

export function rejected(rejection: Rejection): SessionResolution {
  return { kind: 'rejected', rejection };
}

/**
 * Finds the session a request names and checks the request may use it (same principal, a version
 * the server speaks). A session not held here may be another instance's: the cluster is asked,
 * so only then is the answer a promise.
 */
export function resolveSession(
  ctx: EngineContext,
  req: CoreRequest,
  /** For a DELETE: in a shared cluster a copy held here is ended without asking Redis first (see below). */
  deleting = false,
  /** The cluster has checked, since this request came, which sessions are still this instance's. */
  confirmed = false,
): SessionResolution | Promise<SessionResolution> {
  const id = header(req.headers, 'mcp-session-id');
  if (id === undefined || id === '') {
    return rejected(
      reject(400, ErrorCode.ServerError, 'Bad Request: Mcp-Session-Id header is required (send initialize first to get one)'),
    );
  }
  const session = ctx.registry.get(id);
  if (!session) {
    // Its client deleted it here, and Redis has not taken that yet: gone all the same, never
    // restored from the record still there (a peer forwards here while the owner record names this instance).
    if (ctx.registry.ends.deletedHere(id)) return rejected(sessionNotFound());
    const cluster = ctx.options.cluster;
    if (!cluster) return rejected(sessionNotFound());
    if (!fromPeer(cluster, req, FORWARDED_HEADER)) return locate(ctx, req, id);
    // Forwarded here as to the owner, but this instance just let the session go (a hand-off while
    // draining): never bounced on, it is restored here from its record if it has one.
    return cluster.takeOver ? restore(ctx, req, id, principalOf(req.authInfo)) : rejected(sessionNotFound());
  }
  // Back from a pause or a partition past its heartbeat window, this instance first drops the
  // sessions a peer took over meanwhile: a stale copy never serves (issue 20, item 1).
  // A shared cluster's check only drops copies of sessions deleted elsewhere meanwhile: a DELETE
  // ends its copy without it (ending a session twice is harmless), so that Redis being down does
  // not keep the session alive here; the end is owed to Redis until it takes it (issue 27, item 3).
  // One check per request: after a gap that is not over yet (a shared cluster's bus connection
  // still down), the cluster would ask for another at once, and the request would never be served.
  const checking = confirmed || (deleting && ctx.options.cluster?.shared) ? undefined : ctx.options.cluster?.confirmOwnership?.();
  if (checking) return afterOwnershipCheck(ctx, req, checking, deleting);
  if (session.principal !== undefined && session.principal !== principalOf(req.authInfo)) return rejected(foreignPrincipal());
  const version = checkProtocolVersion(header(req.headers, 'mcp-protocol-version'), ctx.supportedVersions);
  if (!version.ok) return rejected(version);
  session.touch();
  return { kind: 'local', session };
}

/** Resolves the request again once the cluster knows which sessions are still this instance's. */
async function afterOwnershipCheck(
  ctx: EngineContext,
  req: CoreRequest,
  checking: Promise<void>,
  deleting: boolean,
): Promise<SessionResolution> {
  try {
    await checking;
  } catch (error) {
    ctx.options.onError(asError(error, 'cluster ownership check failed'));
    return rejected(unavailable('the session directory'));
  }
  return resolveSession(ctx, req, deleting, true);
}
