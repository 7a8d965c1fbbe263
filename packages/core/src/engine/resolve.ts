import { foreignPrincipal, reject, sessionNotFound, unavailable, ErrorCode } from '../http/errors.js';
import { checkProtocolVersion, header, principalOf } from '../http/rules.js';
import type { CoreRequest } from '../ports/http.js';
import { asError } from '../util/errors.js';
import { OWNERSHIP_RECHECKS_MS } from '../util/retry.js';
import { rejected, type SessionResolution } from './cluster-port.js';
import type { EngineContext } from './context.js';

/**
 * Finds the session a request names and checks the request may use it (same principal, a version
 * the server speaks). A session not held here may be another instance's: the cluster is asked,
 * so only then is the answer a promise.
 */
export function resolveSession(
  ctx: EngineContext,
  req: CoreRequest,
  /** For a DELETE: the cluster may let it end a copy held here without its check (`ClusterPort.confirmHeld`). */
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
  const session = ctx.registry.get(id) ?? (ctx.cluster ? undefined : ctx.registry.restoreKept(id));
  if (!session) {
    // Its client deleted it here, and Redis has not taken that yet: gone all the same, never
    // restored from the record still there (a peer forwards here while the owner record names this instance).
    if (ctx.registry.ends.deletedHere(id)) return rejected(sessionNotFound());
    // Alone, a session not here (nor kept as its record) does not exist; in a cluster, it may be
    // another instance's, or one this instance let go of.
    return ctx.cluster ? ctx.cluster.find(req, id) : rejected(sessionNotFound());
  }
  // In a cluster, a copy held here may be stale (a peer took the session over while this instance
  // was away): the cluster says so first. One check per request: after a gap that is not over yet,
  // the cluster would ask for another at once, and the request would never be served.
  const checking = confirmed ? undefined : ctx.cluster?.confirmHeld(deleting);
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
  for (let i = 0; ; i++) {
    try {
      await checking;
      break;
    } catch (error) {
      if (i === OWNERSHIP_RECHECKS_MS.length) {
        ctx.options.onError(asError(error, 'cluster ownership check failed'));
        return rejected(unavailable('the session directory'));
      }
    }
    await new Promise((resolve) => setTimeout(resolve, OWNERSHIP_RECHECKS_MS[i]));
    const again = ctx.cluster?.confirmHeld(deleting);
    if (!again) break;
    checking = again;
  }
  return resolveSession(ctx, req, deleting, true);
}
