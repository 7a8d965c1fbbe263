import { parseEventId, parseWaitingCursor } from '../events/ids.js';
import { ErrorCode, reject, sendRejection } from '../http/errors.js';
import { checkAccept, header } from '../http/rules.js';
import type { CoreRequest, CoreResponder } from '../ports/http.js';
import { forwardOrTakeOver } from '../cluster/forward.js';
import { askWriterToEndLost } from '../cluster/shared-copies.js';
import { followRemote } from '../cluster/remote-resume.js';
import type { EngineContext } from './context.js';
import { resolveSession } from './resolve.js';
import { handOver, servedWhileDraining } from './drain.js';
import { resume } from './resume.js';
import { resumeLater } from './resume-later.js';

/**
 * `GET`: with `Last-Event-ID`, a client resuming a stream (here, or from the shared store for
 * another instance's session); without, the session's standalone stream for messages that belong
 * to no request.
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
  // Draining: no stream starts here; the client follows its session from another instance (the
  // owner's calls go on here, appending to the shared store).
  if (found.kind === 'moved' || (ctx.draining && ctx.options.cluster && !servedWhileDraining(ctx, req))) {
    return handOver(ctx, req, res, undefined, found.kind === 'local' ? found.session : undefined);
  }
  if (found.kind === 'remote' && resuming) {
    const followed = await followRemote(ctx, res, found, lastEventId, ctx.polling(ctx.versionOf(req, undefined)));
    if (followed !== 'refused') return;
  }
  // Shared: a stream another copy of the session writes (or wrote) is followed through the store.
  if (found.kind === 'local' && resuming && ctx.options.cluster?.shared) {
    const cursor = parseEventId(lastEventId);
    if (cursor !== undefined && !found.session.activeStream(cursor.streamId)) {
      const polling = ctx.polling(ctx.versionOf(req, found.session));
      const sessionId = found.session.sessionId as string;
      const followed = await followRemote(ctx, res, { sessionId }, lastEventId, polling);
      if (followed !== 'refused') return;
      // The store cannot replay what the client missed: the copy that writes the stream answers its
      // requests in the store with an error, read from there (else 404/410, below).
      if (await askWriterToEndLost(ctx, sessionId, cursor.streamId, cursor.seq)) {
        if ((await followRemote(ctx, res, { sessionId }, lastEventId, polling)) !== 'refused') return;
      }
    }
  }
  const session = found.kind === 'remote' ? await forwardOrTakeOver(ctx, req, res, found, undefined) : found.session;
  if (!session) return;
  const polling = ctx.polling(ctx.versionOf(req, session));
  if (resuming) return resume(ctx, res, session, lastEventId, polling);
  const { stream, created } = session.standaloneStream(polling);
  const opened = session.openStream(stream, res, created);
  if (opened !== true) await opened;
}
