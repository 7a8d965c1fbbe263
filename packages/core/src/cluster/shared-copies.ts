import type { SessionDirectory } from '../ports/cluster.js';
import type { ClusterMessage, SessionCopies } from '../ports/copies.js';
import { answerAndCancel } from '../session/end-calls.js';
import { LOST_EVENTS } from '../http/call-errors.js';
import type { JSONRPCMessage, RequestId } from '../ports/mcp.js';
import { RECORDED_METHODS } from '../session/record.js';
import type { Session } from '../session/session.js';
import { instanceOfTag } from '../session/answer-tags.js';
import { asError } from '../util/errors.js';
import type { EngineContext } from '../engine/context.js';
import { reportLostEvents } from '../engine/resume.js';
import { answerLostStream } from './lost-calls.js';

/**
 * What shared mode keeps beside the engine's context: the `SharedMode` is one, and the functions
 * here take it without importing the mode back.
 */
export class Sharing {
  /** Resumes waiting for a stream's writer to answer the requests the store lost (see {@link askWriterToEndLost}). */
  readonly lostEventsAnswered = new Map<string, Set<() => void>>();

  constructor(
    readonly ctx: EngineContext,
    readonly directory: SessionDirectory,
    readonly copies: SessionCopies,
  ) {}
}

/**
 * Shared mode (serverless: no instance reaches another, see `SessionCopies`): each instance that
 * gets a request for a session serves it with its own copy, so a call runs where its POST landed.
 * What the client sends later for that call may land anywhere; these messages go to the copy that
 * runs it, through the cluster: the client's answer to one of the server's requests (its id is
 * tagged with the instance, see `SessionServer.answerTags`), a `notifications/cancelled` for a
 * request not running here, and a new log level or resource subscription, which every copy takes.
 *
 * Returns the messages to serve here, and the posts of those that go elsewhere (answers and
 * cancels: a POST that carried one is answered once its message is kept for the copy that runs the
 * call, which finds it even if it does not listen right now; 503 if it could not be kept).
 */
export function routeShared(
  state: Sharing,
  session: Session,
  messages: JSONRPCMessage[],
): { here: JSONRPCMessage[]; posted: Promise<void>[] } {
  const { ctx, copies } = state;
  const sessionId = session.sessionId as string;
  const here: JSONRPCMessage[] = [];
  const posted: Promise<void>[] = [];
  for (const message of messages) {
    if (!('method' in message)) {
      const to = 'id' in message && !session.server.awaitsAnswer(message.id) ? instanceOfTag(message.id) : undefined;
      if (to === undefined || to === state.directory.instanceId) here.push(message);
      else posted.push(copies.post(to, { kind: 'answer', sessionId, message }));
      continue;
    }
    if (message.method === 'notifications/cancelled' && !('id' in message)) {
      const requestId = (message.params as { requestId?: RequestId } | undefined)?.requestId;
      if (requestId !== undefined && session.isInFlight(requestId)) here.push(message);
      else posted.push(copies.post('*', { kind: 'cancel', sessionId, message }));
      continue;
    }
    if (RECORDED_METHODS.has(message.method) && 'id' in message) {
      // Every copy takes it; this one answers the client (and saves the record).
      const request = { method: message.method, params: message.params as Record<string, unknown> | undefined };
      copies
        .post('*', { kind: 'record', sessionId, request })
        .catch((error: unknown) => ctx.options.onError(asError(error, 'cluster post (record) failed')));
    }
    here.push(message);
  }
  return { here, posted };
}

/** What another copy sends this instance about a session it holds a copy of. */
export function receiveShared(state: Sharing, message: ClusterMessage): void {
  const { ctx } = state;
  if (message.kind === 'lost-events-answered') {
    for (const answered of state.lostEventsAnswered.get(lostKey(message)) ?? []) answered();
    return;
  }
  const session = ctx.registry.get(message.sessionId);
  if (!session || session.closed) return;
  switch (message.kind) {
    case 'answer': {
      const id = 'id' in message.message ? message.message.id : undefined;
      if (session.server.awaitsAnswer(id)) session.dispatch([message.message], { headers: {} });
      return;
    }
    case 'cancel': {
      const requestId = ('params' in message.message ? (message.message.params as { requestId?: RequestId }) : undefined)?.requestId;
      if (requestId !== undefined && session.isInFlight(requestId)) session.dispatch([message.message], { headers: {} });
      return;
    }
    case 'record':
      session.server.apply(message.request);
      return;
    case 'ended':
      session.terminate(undefined, 'deleted-elsewhere');
      return;
    case 'lost-events':
      endLostStream(state, session, message).catch((error: unknown) =>
        ctx.options.onError(asError(error, 'answering requests whose events the store lost failed')),
      );
  }
}

/** How long a resume waits for the copy that writes a stream the store lost to answer its requests. */
export const LOST_EVENTS_WAIT_MS = 1_500;

/**
 * How many times a client whose resume found no writer answering is sent back to come later
 * before it hears `404`/`410`: with engine/resume-later.ts's pace (0.5, 1, 2 and 4 s) and a wait of
 * {@link LOST_EVENTS_WAIT_MS} each time, a writer has about 15 s to come back from an outage and
 * answer from its inbox.
 */
export const LOST_WRITER_WAITS = 4;

const lostKey = (m: { sessionId: string; streamId: string }) => `${m.sessionId} ${m.streamId}`;

/**
 * Shared mode: the client came back here to a stream another copy writes (or wrote), and the
 * store cannot replay what it missed (Redis restarted empty, or evicted it). Only that copy knows
 * the stream's requests: every instance is asked, and the one that writes the stream answers them
 * in the store with {@link LOST_EVENTS} (see endLostStream). Resolves `true` once it says so, so
 * the resume reads the answers from the store; `false` after {@link LOST_EVENTS_WAIT_MS} without
 * one (the writer is gone too, or the stream ended long ago), or when the post failed.
 */
export async function askWriterToEndLost(state: Sharing, sessionId: string, streamId: string, afterSeq: number): Promise<boolean> {
  const { ctx, copies } = state;
  const key = lostKey({ sessionId, streamId });
  let timer: ReturnType<typeof setTimeout> | undefined;
  let onAnswer: (() => void) | undefined;
  const answered = new Promise<boolean>((resolve) => {
    onAnswer = () => resolve(true);
    timer = setTimeout(() => resolve(false), LOST_EVENTS_WAIT_MS);
    timer.unref?.();
  });
  // Several resumes of one stream may wait at once: each hears the answer.
  const waiting = state.lostEventsAnswered.get(key) ?? new Set<() => void>();
  state.lostEventsAnswered.set(key, waiting.add(onAnswer!));
  try {
    await copies.post('*', { kind: 'lost-events', sessionId, streamId, afterSeq, from: ctx.instanceId });
    return await answered;
  } catch (error) {
    ctx.options.onError(asError(error, 'cluster post (lost-events) failed'));
    return false;
  } finally {
    clearTimeout(timer);
    waiting.delete(onAnswer!);
    if (waiting.size === 0) state.lostEventsAnswered.delete(key);
  }
}

/**
 * The copy that writes the stream a client came back to elsewhere, whose events the store lost:
 * a call still running is answered with {@link LOST_EVENTS} on its stream (stored like any answer)
 * and cancelled, as the owner does in a forwarding cluster (engine/resume.ts); answers given while
 * the client was away are stored again as that error after the client's cursor. Then the asking
 * instance is told. A copy that does not write the stream says nothing.
 */
async function endLostStream(
  state: Sharing,
  session: Session,
  message: { sessionId: string; streamId: string; afterSeq: number; from: string },
): Promise<void> {
  const { ctx } = state;
  const stream = session.activeStream(message.streamId);
  const awaited = session.routes.answersAwaited(message.streamId);
  if (stream?.kind === 'request' && stream.pending.size > 0) {
    const ids = [...stream.pending];
    reportLostEvents(ctx, ids.length);
    await answerAndCancel(session, ids, LOST_EVENTS);
  } else if (!stream && awaited && awaited.ids.length > 0) {
    const ids = awaited.ids;
    reportLostEvents(ctx, ids.length);
    await answerLostStream(ctx, message.sessionId, { streamId: message.streamId, lastSeq: message.afterSeq, requestIds: ids }, LOST_EVENTS);
    session.routes.fetched(message.streamId);
  } else return;
  await state.copies.post(message.from, {
    kind: 'lost-events-answered',
    sessionId: message.sessionId,
    streamId: message.streamId,
  });
}
