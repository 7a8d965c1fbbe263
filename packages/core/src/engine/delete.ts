import { foreignPrincipal, sendRejection, unavailable } from '../http/errors.js';
import { header, principalOf } from '../http/rules.js';
import type { CoreRequest, CoreResponder } from '../ports/http.js';
import type { Session } from '../session/session.js';
import type { EngineContext } from './context.js';
import { withSession } from './resolve.js';
import { holderOf } from './holder.js';

/**
 * `DELETE`: the client ends its session; every stream of it ends, its tools are aborted, its events
 * dropped. In a cluster the answer waits for the end to be in Redis (invariant:
 * stored-before-success): 200 once it is, 503 if Redis did not take it. The session is gone here
 * either way, and this instance keeps telling the cluster until it listens.
 */
export async function serveDelete(ctx: EngineContext, req: CoreRequest, res: CoreResponder): Promise<void> {
  // Sent again after a 503: the end this instance still owes the cluster is tried now.
  const id = header(req.headers, 'mcp-session-id');
  const owed = id === undefined ? undefined : ctx.registry.ends.deletedHere(id);
  if (owed) {
    if (owed.principal !== undefined && owed.principal !== principalOf(req.authInfo)) return sendRejection(res, foreignPrincipal());
    return answer(res, await ctx.registry.ends.endEverywhere(id!, owed.principal));
  }
  return withSession(ctx, req, res, { deleting: true }, (session) => end(ctx, req, res, session));
}

async function end(ctx: EngineContext, req: CoreRequest, res: CoreResponder, session: Session): Promise<void> {
  session.terminate(undefined, 'delete');
  const ended = await ctx.registry.ends.ended(session.sessionId as string);
  // It no longer counts toward its client's quota of sessions in the deployment.
  if (ended) ctx.cluster?.dismiss(session.holder ?? holderOf(ctx, req), session.sessionId as string);
  answer(res, ended);
}

function answer(res: CoreResponder, ended: boolean): void {
  if (ended) res.send(200, {}, undefined);
  else sendRejection(res, unavailable('the session directory'));
}
