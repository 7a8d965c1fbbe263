import { eventId, parseEventId } from '../events/ids.js';
import { answerAndCancel } from '../session/end-calls.js';
import { LOST_EVENTS } from '../http/call-errors.js';
import { malformedCursor, replayRejection, sendRejection, unavailable } from '../http/errors.js';
import type { ReplayResult } from '../ports/event-store.js';
import type { RequestId } from '../ports/mcp.js';
import type { CoreResponder } from '../ports/http.js';
import type { SseConnection } from '../streams/connection.js';
import { messageEvent, primingEvent, SSE_HEADERS } from '../streams/frames.js';
import type { Stream } from '../streams/stream.js';
import type { Session } from '../session/session.js';
import { replayed, watchConnection } from '../telemetry/watch.js';
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
  let replayedFrames = await ctx.replay(session.sessionId as string, cursor.streamId, cursor.seq);
  if (replayedFrames === undefined) return sendRejection(res, unavailable('the event store'));
  if (!replayedFrames.ok && !replayedFrames.final && !session.activeStream(cursor.streamId)) {
    // The call may have ended while the store was read: its final frame is stored by now.
    replayedFrames = await ctx.replay(session.sessionId as string, cursor.streamId, cursor.seq);
    if (replayedFrames === undefined) return sendRejection(res, unavailable('the event store'));
  }
  // The stream ended here but the store has not its end: the call may have ended while the store
  // was read (its end is stored by now: read again), or the store lost it (a failover to a replica
  // that lacked it), and then its calls' answers are this instance's to tell.
  if (
    replayedFrames.ok &&
    !replayedFrames.complete &&
    !session.activeStream(cursor.streamId) &&
    session.routes.answersAwaited(cursor.streamId)
  ) {
    replayedFrames = await ctx.replay(session.sessionId as string, cursor.streamId, cursor.seq);
    if (replayedFrames === undefined) return sendRejection(res, unavailable('the event store'));
    if (replayedFrames.ok && !replayedFrames.complete && answerAwaited(ctx, res, session, cursor)) return;
  }
  // A gap in a stream that still runs here but answers nothing more: its end (the lost-events
  // error a resume just gave, or the call's own answer) is on its way to the store. Read again
  // once it is stored, so the gap is not taken for an eviction.
  const ending = replayedFrames.ok ? undefined : session.activeStream(cursor.streamId);
  if (ending?.kind === 'request' && ending.pending.size === 0 && ending.storing) {
    await ending.afterStored(() => {});
    replayedFrames = await ctx.replay(session.sessionId as string, cursor.streamId, cursor.seq);
    if (replayedFrames === undefined) return sendRejection(res, unavailable('the event store'));
  }
  if (!replayedFrames.ok) {
    const running = session.activeStream(cursor.streamId);
    if (running?.kind === 'request' && running.pending.size > 0) return endLostCall(ctx, res, session, running, cursor, polling);
    if (running?.kind === 'standalone' && replayedFrames.reason === 'unknown') return resumeFromNow(ctx, res, session, running, polling);
    if (replayedFrames.final) return answerLostFinal(ctx, res, session.sessionId as string, replayedFrames.final);
    if (answerAwaited(ctx, res, session, cursor)) return;
    return refuseCursor(ctx, res, session.sessionId as string, cursor.streamId, replayedFrames.reason);
  }
  if (nothingLeft(replayedFrames) && !session.activeStream(cursor.streamId)) {
    session.routes.fetched(cursor.streamId);
    return res.send(204, {}, undefined);
  }
  const conn = session.newConnection(res);
  let active = session.activeStream(cursor.streamId);
  const { telemetry } = ctx.options;
  if (telemetry.on) {
    const awayMs = session.routes.awayMs(cursor.streamId, Date.now());
    watchConnection(telemetry, session.sessionId as string, cursor.streamId, conn, 'resume', {
      ...replayed(replayedFrames.frames),
      awayMs,
    });
  }
  if (active ? active.polling : polling) {
    conn.pace = active?.retryMs ?? ctx.options.retryMs;
    conn.write(primingEvent(eventId(cursor.streamId, cursor.seq), conn.pace));
  }
  await conn.replay(replayedFrames.frames);
  const caught = await catchUp(ctx, session, conn, cursor.streamId, replayedFrames);
  if (caught === undefined || conn.closed) return;
  if (session.closed) return conn.end(ctx.drain.closing ? (conn.pace ?? ctx.options.retryMs) : undefined);
  active = session.activeStream(cursor.streamId);
  if (caught.complete) session.routes.fetched(cursor.streamId);
  if (caught.complete || !active) return conn.end();
  session.follow(active, conn, caught.lastSeq);
}

/**
 * Answered here while its client was away, then lost by the store (Redis restarted empty, or a
 * failover to a replica that lacked it): the client hears {@link LOST_EVENTS} under the stream's
 * next event id, and 204 when it comes back from there. `false` when no such answer is held here.
 */
function answerAwaited(ctx: EngineContext, res: CoreResponder, session: Session, cursor: { streamId: string; seq: number }): boolean {
  const awaited = session.routes.answersAwaited(cursor.streamId);
  if (!awaited || awaited.ids.length === 0) return false;
  if (awaited.toldAt === cursor.seq) {
    session.routes.fetched(cursor.streamId);
    res.send(204, {}, undefined);
    return true;
  }
  awaited.toldAt = cursor.seq + 1;
  answerLostEvents(ctx, res, session.sessionId as string, awaited.ids, eventId(cursor.streamId, awaited.toldAt));
  return true;
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
      conn.end(conn.pace ?? ctx.options.retryMs);
      return undefined;
    }
    const progressed = more.lastSeq > lastSeq;
    lastSeq = more.lastSeq;
    complete = more.complete;
    await conn.replay(more.frames);
    // Gone from the session with nothing more stored (deleted, or dropped): nothing to wait for.
    if (!progressed && !active) break;
    // Frames the store does not hold yet (it is back from an outage, or the write is on its way):
    // read again once they are stored, not at once in a loop.
    if (!progressed && active) await active.afterStored(() => {});
  }
  return { lastSeq, complete };
}

/**
 * The client comes back for a call that still runs here, but the store no longer has what it
 * missed (Redis restarted empty, or evicted the stream): the rest can never reach it in order.
 * Rather than a 410 that an SDK client answers by waiting for its request timeout, the call ends
 * now: each of its requests is answered on its own stream with an error naming why (stored as the
 * stream's final frame, and written to this connection), then cancelled (the tool is aborted
 * through its signal). The answer carries an event id: SDK v1 takes only a result as the end of a
 * resumed stream and comes back after an error, and with that id it hears 204 (nothing left)
 * instead of opening a second standalone stream without one.
 */
function endLostCall(
  ctx: EngineContext,
  res: CoreResponder,
  session: Session,
  stream: Stream,
  cursor: { streamId: string; seq: number },
  polling: boolean,
): void {
  const ids = [...stream.pending];
  reportLostEvents(ctx, ids.length);
  const conn = session.newConnection(res);
  // Primed with the client's own cursor: should the connection end before the answer is out (the
  // store is failing over), SDK v1 comes back from there, not with no Last-Event-ID at all.
  if (polling) {
    conn.pace = stream.retryMs ?? ctx.options.retryMs;
    conn.write(primingEvent(eventId(cursor.streamId, cursor.seq), conn.pace));
  }
  session.follow(stream, conn, stream.seq);
  void answerAndCancel(session, ids, LOST_EVENTS);
}

/**
 * The client comes back to the session's standalone stream, which lives here, but the store no
 * longer knows it (Redis restarted empty): what it missed can never be replayed. A 404 would tell
 * the client its session is gone, and it is not: the stream goes on from now on this connection,
 * primed with the current cursor (what was lost carried no request's answer: those go on request
 * streams, and a lost one ends its call with an error, see endLostCall).
 */
function resumeFromNow(ctx: EngineContext, res: CoreResponder, session: Session, stream: Stream, polling: boolean): void {
  ctx.options.onError(new Error("the event store lost the session's standalone stream; the client follows it from now"));
  const conn = session.newConnection(res);
  if (polling) {
    conn.pace = stream.retryMs ?? ctx.options.retryMs;
    conn.write(primingEvent(eventId(stream.id, stream.seq), conn.pace));
  }
  session.follow(stream, conn, stream.seq);
}

export function reportLostEvents(ctx: EngineContext, requests: number): void {
  ctx.options.onError(
    new Error(`the event store lost events of ${requests} request(s) before their client read them; answered with an error`),
  );
}

/** Answers `ids` with {@link LOST_EVENTS} on an SSE stream that ends at once, the last one with event id `lastId`. */
export function answerLostEvents(
  ctx: EngineContext,
  res: CoreResponder,
  sessionId: string,
  ids: RequestId[],
  lastId: string | undefined,
): void {
  if (ids.length === 0) return sendRejection(res, replayRejection('evicted'));
  reportLostEvents(ctx, ids.length);
  const sink = res.stream({ ...SSE_HEADERS, 'mcp-session-id': sessionId });
  for (const [i, id] of ids.entries()) {
    sink.write(messageEvent(i === ids.length - 1 ? lastId : undefined, JSON.stringify({ jsonrpc: '2.0', id, error: LOST_EVENTS })));
  }
  sink.end();
}

/**
 * The store kept a stream's final frame but lost frames before it: the requests it answered get
 * {@link LOST_EVENTS}, the last with the final frame's event id, so a client that comes back after
 * an error (SDK v1 takes only a result as the end of a resumed stream) resumes past the end: 204.
 */
export function answerLostFinal(ctx: EngineContext, res: CoreResponder, sessionId: string, final: string): void {
  answerLostEvents(ctx, res, sessionId, requestIdsOf(final), fieldOf(final, 'id')?.trim());
}

/** The id a stored final frame answers (its `data:` line is a JSON-RPC response). */
export function requestIdsOf(frame: string): RequestId[] {
  try {
    const id = (JSON.parse(fieldOf(frame, 'data') ?? 'null') as { id?: unknown } | null)?.id;
    return typeof id === 'string' || typeof id === 'number' ? [id] : [];
  } catch {
    return [];
  }
}

/** The value of a stored frame's first `name:` line. */
function fieldOf(frame: string, name: 'id' | 'data'): string | undefined {
  return frame
    .split('\n')
    .find((line) => line.startsWith(`${name}:`))
    ?.slice(name.length + 1);
}

/** A cursor the store cannot replay from: 410 when evicted (reported), 404 when unknown. */
export function refuseCursor(
  ctx: EngineContext,
  res: CoreResponder,
  sessionId: string,
  streamId: string,
  reason: 'unknown' | 'evicted',
): void {
  const { telemetry } = ctx.options;
  if (reason === 'evicted' && telemetry.on) {
    telemetry.emit({ type: 'cursor.evicted', at: Date.now(), session: telemetry.hash(sessionId), stream: telemetry.hash(streamId) });
  }
  sendRejection(res, replayRejection(reason));
}

/**
 * The cursor is the last event of a finished stream: the client has had everything, its answer
 * included. `204`, not an empty stream: an SDK v1 client does not count an error answer as the
 * end of a resumed stream and would come back for it at every `retry`, for as long as it lives.
 */
export function nothingLeft(replay: { frames: readonly string[]; complete: boolean }): boolean {
  return replay.complete && replay.frames.length === 0;
}
