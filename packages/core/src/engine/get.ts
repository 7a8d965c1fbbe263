import { parseEventId, parseWaitingCursor } from '../events/ids.js';
import { ErrorCode, reject, sendRejection } from '../http/errors.js';
import { checkAccept, header } from '../http/rules.js';
import type { CoreRequest, CoreResponder } from '../ports/http.js';
import type { Session } from '../session/session.js';
import type { SessionResolution } from './cluster-port.js';
import type { EngineContext } from './context.js';
import { resolveSession } from './resolve.js';
import { resume } from './resume.js';
import { resumeLater } from './resume-later.js';

/**
 * `GET`: with `Last-Event-ID`, a client resuming a stream (here; in a cluster, a stream written
 * elsewhere is the cluster's to serve from the shared store); without, the session's standalone
 * stream for messages that belong to no request.
 */
export async function serveGet(ctx: EngineContext, req: CoreRequest, given: CoreResponder): Promise<void> {
  const v = checkAccept('GET', header(req.headers, 'accept'));
  if (!v.ok) return sendRejection(given, v);
  const sent = header(req.headers, 'last-event-id');
  const resuming = sent !== undefined && sent !== '';
  // A resume the store or a peer cannot serve now is sent back to come again later (an outage).
  const { cursor: lastEventId, waits } = parseWaitingCursor(sent ?? '');
  const res = resuming ? resumeLater(given, lastEventId, waits) : given;
  if (!resuming && !ctx.options.standaloneStream) {
    const message =
      'Method not allowed: this endpoint opens no standalone SSE stream (standaloneStream: false); GET only resumes a stream, with Last-Event-ID';
    return sendRejection(res, reject(405, ErrorCode.ServerError, message, { allow: 'GET, POST, DELETE' }));
  }
  const resolving = resolveSession(ctx, req);
  const found = resolving instanceof Promise ? await resolving : resolving;
  if (found.kind === 'rejected') return sendRejection(res, found.rejection);
  // A resumed stream carries its calls' results: its token needs their tools' scopes (auth/).
  const cursor = resuming ? parseEventId(lastEventId) : undefined;
  const sessionId = header(req.headers, 'mcp-session-id');
  const scoped = cursor && sessionId !== undefined && ctx.options.auth?.checkResume(req, sessionId, cursor.streamId);
  if (scoped && !scoped.ok) return sendRejection(res, scoped);
  // Only the cluster resolves a session to `moved` or `remote`.
  const cluster = ctx.cluster;
  // Draining in a cluster: no stream starts here; the client follows its session from another
  // instance (the owner's calls go on here, appending to the shared store).
  if (found.kind === 'moved' || (ctx.draining && cluster && !cluster.servedWhileDraining(req))) {
    return cluster!.handOver(req, res, undefined, found.kind === 'local' ? found.session : undefined);
  }
  // Until its stream is open the session looks idle: it is not let go of meanwhile.
  if (found.kind === 'local') return found.session.arrivals.visit(() => serveFound(ctx, req, res, found, lastEventId, resuming));
  return serveFound(ctx, req, res, found, lastEventId, resuming);
}

/** A GET for a session held here, or one another instance holds (or held: then it is restored here). */
async function serveFound(
  ctx: EngineContext,
  req: CoreRequest,
  res: CoreResponder,
  found: Extract<SessionResolution, { kind: 'local' | 'remote' }>,
  lastEventId: string,
  resuming: boolean,
): Promise<void> {
  const cluster = ctx.cluster;
  if (resuming && cluster) {
    const elsewhere = cluster.resumeElsewhere(req, res, found, lastEventId);
    if (elsewhere instanceof Promise ? await elsewhere : elsewhere) return;
  }
  if (found.kind === 'local') return serveHere(ctx, res, found.session, lastEventId, resuming, req);
  // Its owner was gone: the session was restored here.
  const session = await cluster!.serveElsewhere(req, res, found, undefined);
  return session && session.arrivals.visit(() => serveHere(ctx, res, session, lastEventId, resuming, req));
}

async function serveHere(
  ctx: EngineContext,
  res: CoreResponder,
  session: Session,
  lastEventId: string,
  resuming: boolean,
  req: CoreRequest,
): Promise<void> {
  const polling = ctx.polling(ctx.versionOf(req, session));
  if (resuming) return resume(ctx, res, session, lastEventId, polling);
  const { stream, created } = session.standaloneStream(polling);
  const opened = session.openStream(stream, res, created);
  if (opened !== true) await opened;
}
