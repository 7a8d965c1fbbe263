import { foreignPrincipal, sessionNotFound, unavailable } from '../http/errors.js';
import { checkProtocolVersion, header, principalOf } from '../http/rules.js';
import type { SessionOwner } from '../ports/cluster.js';
import type { CoreRequest } from '../ports/http.js';
import { asError } from '../util/errors.js';
import type { EngineContext } from '../engine/context.js';
import { rejected, type SessionResolution } from '../engine/resolve.js';

/**
 * Asks the cluster who owns a session this instance does not hold: another instance (the request
 * is forwarded there, or a resume is served here from the shared store), or nobody (404, and the
 * client initializes again).
 */
export async function locate(ctx: EngineContext, req: CoreRequest, sessionId: string): Promise<SessionResolution> {
  let owner: SessionOwner | undefined;
  try {
    owner = await ctx.options.cluster!.lookupOwner(sessionId);
  } catch (error) {
    ctx.options.onError(asError(error, 'cluster lookupOwner failed'));
    return rejected(unavailable('the session directory'));
  }
  if (!owner || owner.self) return rejected(sessionNotFound('it expired, was deleted, or the server instance that held it is gone'));
  if (owner.principal !== undefined && owner.principal !== principalOf(req.authInfo)) return rejected(foreignPrincipal());
  const version = checkProtocolVersion(header(req.headers, 'mcp-protocol-version'), ctx.supportedVersions);
  if (!version.ok) return rejected(version);
  return { kind: 'remote', sessionId, owner };
}
