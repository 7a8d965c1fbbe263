import { parseEventId, parseWaitingCursor } from '../events/ids.js';
import { ErrorCode, reject, sendRejection, type Rejection } from '../http/errors.js';
import { checkAccept, header } from '../http/rules.js';
import type { CoreRequest, CoreResponder } from '../ports/http.js';
import type { Session } from '../session/session.js';
import type { EngineContext } from './context.js';
import { withSession } from './resolve.js';
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
  const request = resuming ? { lastEventId, check: () => resumeScopes(ctx, req, lastEventId) } : {};
  return withSession(ctx, req, res, request, (session) => serveHere(ctx, res, session, lastEventId, resuming, req));
}

/** A resumed stream carries its calls' results: its token needs their tools' scopes (auth/). */
function resumeScopes(ctx: EngineContext, req: CoreRequest, lastEventId: string): Rejection | undefined {
  const cursor = parseEventId(lastEventId);
  const sessionId = header(req.headers, 'mcp-session-id');
  const scoped = cursor && sessionId !== undefined && ctx.options.auth?.checkResume(req, sessionId, cursor.streamId);
  return scoped && !scoped.ok ? scoped : undefined;
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
