import { sendRejection } from '../http/errors.js';
import type { CoreRequest, CoreResponder } from '../ports/http.js';
import { forwardOrTakeOver } from '../remote/forward.js';
import type { EngineContext } from './context.js';
import { handOver } from './drain.js';
import { resolveSession } from './resolve.js';

/** `DELETE`: the client ends its session; every stream of it ends, its tools are aborted, its events dropped. */
export async function serveDelete(ctx: EngineContext, req: CoreRequest, res: CoreResponder): Promise<void> {
  const resolving = resolveSession(ctx, req);
  const found = resolving instanceof Promise ? await resolving : resolving;
  if (found.kind === 'rejected') return sendRejection(res, found.rejection);
  if (found.kind === 'moved') return handOver(ctx, req, res, undefined);
  const session = found.kind === 'remote' ? await forwardOrTakeOver(ctx, req, res, found, undefined) : found.session;
  if (!session) return;
  session.terminate(undefined, 'delete');
  res.send(200, {}, undefined);
}
