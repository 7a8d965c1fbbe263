import { foreignPrincipal, reject, sendRejection, sessionNotFound, ErrorCode, type Rejection } from '../http/errors.js';
import { checkProtocolVersion, header, principalOf } from '../http/rules.js';
import type { CoreRequest, CoreResponder } from '../ports/http.js';
import type { Session } from '../session/session.js';
import type { SessionRequest } from './cluster-port.js';
import type { EngineContext } from './context.js';

/**
 * Serves a request for the session it names: `here(session)` on the session held here; in a
 * cluster, wherever the cluster finds it (`ClusterPort.serve`). From its arrival until it is done
 * the request holds an arrival the drain waits for: a session it found may look idle meanwhile.
 */
export async function withSession(
  ctx: EngineContext,
  req: CoreRequest,
  res: CoreResponder,
  request: SessionRequest,
  here: (session: Session) => Promise<void>,
): Promise<void> {
  const arrival = ctx.drain.arrive();
  try {
    if (ctx.cluster) return await ctx.cluster.serve(req, res, request, arrival, here);
    const found = sessionHere(ctx, req);
    if ('ok' in found) return sendRejection(res, found);
    const refused = request.check?.();
    if (refused) return sendRejection(res, refused);
    // Until its stream is open the session looks idle: it is not let go of meanwhile.
    return await found.arrivals.visit(() => here(found));
  } finally {
    arrival.release();
  }
}

/**
 * Alone: the session a request names, held here (or kept as its record, see `hibernateAfterMs`)
 * and checked for the request; else why not (404, or the request's own fault).
 */
function sessionHere(ctx: EngineContext, req: CoreRequest): Session | Rejection {
  const id = sessionIdOf(req);
  if (typeof id !== 'string') return id;
  const session = ctx.registry.get(id) ?? ctx.registry.restoreKept(id);
  return session ? checkUse(ctx, req, session) : sessionNotFound();
}

/** The session id a request names, or the answer to a request that names none. */
export function sessionIdOf(req: CoreRequest): string | Rejection {
  const id = header(req.headers, 'mcp-session-id');
  if (id !== undefined && id !== '') return id;
  return reject(400, ErrorCode.ServerError, 'Bad Request: Mcp-Session-Id header is required (send initialize first to get one)');
}

/**
 * Whether the request may use the session held here (invariant: principal-bound; a version the
 * server speaks): the session, touched, or the rejection.
 */
export function checkUse(ctx: EngineContext, req: CoreRequest, session: Session): Session | Rejection {
  if (session.principal !== undefined && session.principal !== principalOf(req.authInfo)) return foreignPrincipal();
  const version = checkProtocolVersion(header(req.headers, 'mcp-protocol-version'), ctx.supportedVersions);
  if (!version.ok) return version;
  session.touch();
  return session;
}
