import { foreignPrincipal, sessionNotFound } from '../http/errors.js';
import { checkProtocolVersion, header } from '../http/rules.js';
import type { CoreRequest } from '../ports/http.js';
import type { Restored } from '../ports/record.js';
import type { Session } from '../session/session.js';
import type { EngineContext } from '../engine/context.js';
import { rejected, type Found } from './mode.js';

/** Why a session the cluster does not know is gone, as its client hears it (404). */
export const GONE = 'it expired, was deleted, or the server instance that held it is gone';

/**
 * Makes a copy of the session here from its record, in either mode (forwarding: once this instance
 * took it over), or finds the copy a request racing this one made. `then` runs once on a new copy
 * before any request is served on it (forwarding answers the calls its gone owner was running).
 */
export async function restoreCopy(
  ctx: EngineContext,
  req: CoreRequest,
  sessionId: string,
  restored: Restored | undefined,
  then?: (session: Session) => Promise<void>,
): Promise<Found> {
  if (restored === undefined) return rejected(sessionNotFound(GONE));
  if ('forbidden' in restored) return rejected(foreignPrincipal());
  const version = checkProtocolVersion(header(req.headers, 'mcp-protocol-version'), ctx.supportedVersions);
  if (!version.ok) return rejected(version);
  // Requests for the session racing here: the first restores it, the others find it.
  let session = ctx.registry.get(sessionId);
  if (!session) {
    session = ctx.registry.restore(sessionId, restored.principal, restored.record);
    if (then) session.arrivals.restore(then(session));
  }
  await session.arrivals.restoring;
  session.touch();
  return { kind: 'local', session };
}
