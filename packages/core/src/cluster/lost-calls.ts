import { eventId } from '../events/ids.js';
import { LOST_CALL } from '../http/call-errors.js';
import type { UnfinishedStream } from '../ports/event-store.js';
import type { Session } from '../session/session.js';
import { messageEvent } from '../streams/frames.js';
import { asError } from '../util/errors.js';
import type { EngineContext } from '../engine/context.js';

/**
 * A session restored here from an instance that is gone had calls running there that will never
 * answer. Each gets its answer now: an error that says so, stored on its stream as the final frame,
 * so a client that resumes it anywhere (or follows it from another instance through the store's
 * live tail) ends the call instead of waiting forever.
 */
export async function answerLostCalls(ctx: EngineContext, session: Session): Promise<void> {
  const store = ctx.options.eventStore;
  const sessionId = session.sessionId as string;
  if (!store.unfinished) return;
  let streams: UnfinishedStream[];
  try {
    streams = await store.unfinished(sessionId);
  } catch (error) {
    ctx.options.onError(asError(error, 'event store unfinished failed'));
    return;
  }
  for (const stream of streams) {
    if (stream.requestIds.length === 0 || session.activeStream(stream.streamId)) continue;
    await answerLostStream(ctx, sessionId, stream);
  }
}

/**
 * Answers each request of a stream whose instance is gone with {@link LOST_CALL} (or `answer`),
 * stored after its last frame (the last answer final). A frame stored meanwhile by a writer that
 * came back wins: the store keeps one frame per seq and nothing after a final one.
 */
export async function answerLostStream(
  ctx: EngineContext,
  sessionId: string,
  stream: UnfinishedStream,
  answer: { code: number; message: string } = LOST_CALL,
): Promise<void> {
  const store = ctx.options.eventStore;
  let seq = stream.lastSeq;
  for (const [i, id] of stream.requestIds.entries()) {
    const frame = messageEvent(eventId(stream.streamId, ++seq), JSON.stringify({ jsonrpc: '2.0', id, error: answer }));
    try {
      await store.append({ sessionId, streamId: stream.streamId }, seq, frame, i === stream.requestIds.length - 1);
    } catch (error) {
      ctx.options.onError(asError(error, 'answering a lost call failed'));
      return;
    }
  }
}
