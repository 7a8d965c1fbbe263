import { eventId, parseEventId } from '../events/ids.js';
import { malformedCursor, sendRejection, unavailable } from '../http/errors.js';
import type { SessionDirectory } from '../ports/cluster.js';
import type { SessionOwner, SessionOwners } from '../ports/owners.js';
import type { StreamKey, StreamListener, StreamSubscription } from '../ports/event-store.js';
import type { CoreResponder } from '../ports/http.js';
import { SseConnection } from '../streams/connection.js';
import { primingEvent, SSE_HEADERS } from '../streams/frames.js';
import { asError } from '../util/errors.js';
import type { EngineContext } from '../engine/context.js';
import { answerLostFinal, nothingLeft } from '../engine/resume.js';
import { replayed, watchConnection } from '../telemetry/watch.js';
import { answerLostStream } from './lost-calls.js';

/**
 * The live part of a resume served for a stream another instance writes: what its writer keeps
 * appending reaches this instance through `eventStore.subscribe`. Frames that arrive before the
 * client's connection has its replay wait here, up to `maxBufferedBytes`: a slow reader holding the
 * replay up must not make this instance hold the writer's output without bound (invariant:
 * bounded). Past the mark the connection is cut with the retry hint, as a local stream's is; every
 * frame is in the store, so the client's next resume gets them.
 */
export class RemoteTail implements StreamListener {
  private conn: SseConnection | undefined;
  /** The connection while its replay is written, cut if what waits here outgrows the mark. */
  private replaying: SseConnection | undefined;
  private early: Array<[frame: string, seq: number, final: boolean]> = [];
  private earlyBytes = 0;
  private ended: { retryMs: number | undefined } | undefined;

  constructor(
    private readonly retryMs: number,
    private readonly maxBufferedBytes: number,
  ) {}

  frame(frame: string, seq: number, final: boolean): void {
    if (this.conn) {
      this.conn.write(frame, seq);
      if (final) this.conn.end();
      return;
    }
    if (this.ended) return;
    this.early.push([frame, seq, final]);
    this.earlyBytes += frame.length;
    if (this.earlyBytes > this.maxBufferedBytes) this.overflow();
  }

  end(reason: 'deleted' | 'error'): void {
    // A deleted session ends like a local one; a broken tail asks the client to come back.
    this.finish(reason === 'error' ? this.retryMs : undefined);
  }

  closed(retryMs: number): void {
    this.finish(retryMs);
  }

  /** `conn` is getting its replay: what the tail delivers meanwhile waits here. */
  replayingTo(conn: SseConnection): void {
    this.replaying = conn;
  }

  /** The connection has its replay: it carries the tail from here, starting with what waited. */
  attach(conn: SseConnection): void {
    this.conn = conn;
    this.replaying = undefined;
    for (const [frame, seq, final] of this.early) {
      conn.write(frame, seq);
      if (final) conn.end();
    }
    this.early = [];
    if (this.ended) conn.end(this.ended.retryMs);
  }

  private overflow(): void {
    this.early = [];
    this.earlyBytes = 0;
    this.ended = { retryMs: this.retryMs };
    this.replaying?.end(this.retryMs, 'slow-reader');
  }

  private finish(retryMs: number | undefined): void {
    if (this.conn) this.conn.end(retryMs);
    else this.ended = { retryMs };
  }
}

/**
 * While a client follows here a stream another instance writes: checks, now and every
 * `writerCheckMs`, that the writer still lives, and ends what the client would otherwise wait for
 * forever. Returns the timer.
 */
export type WriterWatch = (key: StreamKey, live: SseConnection, retryMs: number) => ReturnType<typeof setInterval>;

/**
 * `GET` + `Last-Event-ID` for a stream another instance writes: replay from the shared store, then
 * follow what the writer keeps appending until the stream completes, as the writer would. The
 * subscription starts before the response, so a store failure is still a 503. A cursor the store
 * cannot replay from is the writer's to answer (`'refused'`, nothing sent): only the writer knows
 * whether the call still runs, and can end it for its client with an error. `watch` checks the
 * writer meanwhile (the mode knows how).
 */
export async function followRemote(
  ctx: EngineContext,
  res: CoreResponder,
  remote: { sessionId: string; owner?: SessionOwner },
  lastEventId: string,
  polling: boolean,
  watch: WriterWatch,
): Promise<'refused' | void> {
  const cursor = parseEventId(lastEventId);
  if (!cursor) return sendRejection(res, malformedCursor(lastEventId));
  const { eventStore: store, maxBufferedBytes, maxStreamDurationMs } = ctx.options;
  const result = await ctx.replay(remote.sessionId, cursor.streamId, cursor.seq);
  if (result === undefined) return sendRejection(res, unavailable('the event store'));
  if (!result.ok && result.final) return answerLostFinal(ctx, res, remote.sessionId, result.final);
  if (!result.ok) return 'refused';
  if (nothingLeft(result)) return res.send(204, {}, undefined);
  // The pace the tool last set (closeSSEStream), where the store keeps it; else the handler's.
  const retryMs = result.retryMs ?? ctx.options.retryMs;
  const tail = new RemoteTail(retryMs, maxBufferedBytes);
  let subscription: StreamSubscription | undefined;
  if (!result.complete && store.subscribe) {
    try {
      subscription = await store.subscribe({ sessionId: remote.sessionId, streamId: cursor.streamId }, result.lastSeq, tail);
    } catch (error) {
      ctx.options.onError(asError(error, 'event store subscribe failed'));
      return sendRejection(res, unavailable('the event store'));
    }
  }
  const live = new SseConnection(
    res.stream({ ...SSE_HEADERS, 'mcp-session-id': remote.sessionId }),
    maxBufferedBytes,
    (c) => c.end(retryMs),
    Date.now(),
  );
  ctx.registry.live.add(live);
  watchConnection(ctx.options.telemetry, remote.sessionId, cursor.streamId, live, 'remote', replayed(result.frames));
  const timers: Array<ReturnType<typeof setTimeout>> = [];
  live.onClose(() => {
    ctx.registry.live.delete(live);
    subscription?.cancel();
    for (const t of timers) clearTimeout(t);
  });
  // Counted from the start, as a local stream's: a slow replay is no reason to hold it longer.
  if (maxStreamDurationMs !== undefined && polling) timers.push(setTimeout(() => live.end(retryMs, 'duration'), maxStreamDurationMs));
  live.pace = retryMs;
  if (polling) live.write(primingEvent(eventId(cursor.streamId, cursor.seq), retryMs));
  // What the tail delivers while a slow reader holds the replay up waits in the tail.
  tail.replayingTo(live);
  await live.replay(result.frames);
  live.skipThrough(result.lastSeq);
  // Without a live tail the client polls: it comes back after the retry hint for the rest.
  if (result.complete || !subscription) return live.end(result.complete ? undefined : retryMs);
  tail.attach(live);
  if (live.closed) return;
  timers.push(watch({ sessionId: remote.sessionId, streamId: cursor.streamId }, live, retryMs));
}

/**
 * Shared mode: the stream's writer is the copy that runs its calls. One frozen or dead mid-call (a
 * serverless instance without `waitUntil`) appends nothing more: its requests are answered with
 * {@link LOST_CALL} in the store, which the tail delivers, so the client is never left waiting.
 */
export function watchWriter(ctx: EngineContext, directory: SessionDirectory): WriterWatch {
  return (key) => {
    let checking = false;
    const check = () => {
      // Best effort, as for a followed owner: a touch only keeps the session from idling out.
      void Promise.resolve()
        .then(() => directory.touch?.(key.sessionId))
        .catch(() => {});
      if (checking) return;
      checking = true;
      void endIfWriterGone(ctx, directory, key)
        .catch(() => {}) // a store or directory hiccup is not a verdict; the next check decides
        .finally(() => (checking = false));
    };
    check();
    const timer = setInterval(check, directory.writerCheckMs ?? 5_000);
    timer.unref?.();
    return timer;
  };
}

async function endIfWriterGone(ctx: EngineContext, directory: SessionDirectory, key: StreamKey): Promise<void> {
  const store = ctx.options.eventStore;
  if (!store.writer || !directory.instanceAlive) return;
  const writer = await store.writer(key);
  if (!writer || writer.complete || writer.requestIds.length === 0) return;
  if (await directory.instanceAlive(writer.instanceId)) return;
  ctx.options.onError(
    new Error(`instance ${writer.instanceId} stopped beating while it ran ${writer.requestIds.length} request(s); answered with an error`),
  );
  await answerLostStream(ctx, key.sessionId, { streamId: key.streamId, lastSeq: writer.lastSeq, requestIds: writer.requestIds });
}

/**
 * Forwarding: the stream's writer is the session's owner. While a client follows the session here,
 * keeps it alive on its owner (`touch`) and checks that the owner is still there: an owner that
 * died mid-call appends nothing more, so the client is sent back (with the retry hint); its next
 * request takes the session over where it lands (or gets 404 without a record to restore from) and
 * learns the call's fate there.
 */
export function watchOwner(directory: SessionDirectory, owners: SessionOwners): WriterWatch {
  return ({ sessionId }, live, retryMs) => {
    const touch = () => {
      try {
        void Promise.resolve(directory.touch?.(sessionId)).catch(() => {});
      } catch {
        // Best effort: the owner only uses it to keep the session from idling out.
      }
    };
    touch();
    const check = setInterval(() => {
      touch();
      owners.lookupOwner(sessionId).then(
        (owner) => {
          if (!owner || owner.self) live.end(retryMs);
        },
        () => {}, // a directory hiccup is not a verdict; the next check decides
      );
    }, directory.writerCheckMs ?? 5_000);
    check.unref?.();
    return check;
  };
}
