import { eventId, parseEventId } from '../events/ids.js';
import { malformedCursor, replayRejection, sendRejection, unavailable } from '../http/errors.js';
import type { ReplayResult } from '../ports/event-store.js';
import type { CoreResponder } from '../ports/http.js';
import type { SseConnection } from '../streams/connection.js';
import { primingEvent } from '../streams/frames.js';
import type { Session } from '../session/session.js';
import type { EngineContext } from './context.js';

/**
 * `GET` + `Last-Event-ID` on the session's owner: replay what the stream missed, then follow it
 * live until it completes. The stream's last close retry is repeated, so the pace a tool set sticks.
 */
export async function resume(
  ctx: EngineContext,
  res: CoreResponder,
  session: Session,
  lastEventId: string,
  polling: boolean,
): Promise<void> {
  const cursor = parseEventId(lastEventId);
  if (!cursor) return sendRejection(res, malformedCursor(lastEventId));
  const replayed = await ctx.replay(session.sessionId as string, cursor.streamId, cursor.seq);
  if (replayed === undefined) return sendRejection(res, unavailable('the event store'));
  if (!replayed.ok) return sendRejection(res, replayRejection(replayed.reason));
  const conn = session.newConnection(res);
  let active = session.activeStream(cursor.streamId);
  if (active ? active.polling : polling)
    conn.write(primingEvent(eventId(cursor.streamId, cursor.seq), active?.retryMs ?? ctx.options.retryMs));
  await conn.replay(replayed.frames);
  const caught = await catchUp(ctx, session, conn, cursor.streamId, replayed);
  if (caught === undefined || conn.closed) return;
  if (session.closed) return conn.end(ctx.closing ? ctx.options.retryMs : undefined);
  active = session.activeStream(cursor.streamId);
  if (caught.complete || !active) return conn.end();
  session.follow(active, conn, caught.lastSeq);
}

/**
 * A slow reader makes the replay wait, and the stream may go on (or finish) meanwhile; an
 * asynchronous store may not yet hold every frame the stream assigned. Reads the store again until
 * nothing is missing. (A stream gone but not complete finished while we read: its final frame is
 * stored before it leaves the session, so one more read gets it.) `undefined` when the connection
 * had to end: the store failed, or evicted what the client was reading (its next resume hears 410).
 */
async function catchUp(
  ctx: EngineContext,
  session: Session,
  conn: SseConnection,
  streamId: string,
  from: { lastSeq: number; complete: boolean },
): Promise<{ lastSeq: number; complete: boolean } | undefined> {
  let { lastSeq, complete } = from;
  while (!complete && !conn.closed && !session.closed) {
    const active = session.activeStream(streamId);
    if (active && active.seq <= lastSeq) break;
    const more: ReplayResult | undefined = await ctx.replay(session.sessionId as string, streamId, lastSeq);
    if (more === undefined || !more.ok) {
      conn.end(ctx.options.retryMs);
      return undefined;
    }
    const progressed = more.lastSeq > lastSeq;
    lastSeq = more.lastSeq;
    complete = more.complete;
    await conn.replay(more.frames);
    // Gone from the session with nothing more stored (deleted, or dropped): nothing to wait for.
    if (!progressed && !active) break;
  }
  return { lastSeq, complete };
}
