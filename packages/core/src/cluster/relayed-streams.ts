import type { CoreResponder, SseSink } from '../ports/http.js';
import { retryField } from '../streams/frames.js';

/** One relayed stream: the last retry hint its peer wrote, whether it carried an event id, and how long it has been silent. */
interface Relayed {
  pace: number | undefined;
  /** The client holds a cursor (an `id:` came through): it can resume the stream elsewhere. */
  resumable: boolean;
  /** Chunks written since the watchdog last looked. */
  writes: number;
  /** How long no chunk came, as the watchdog counts (in steps of its period). */
  silentMs: number;
  /** Ends the stream with the retry hint (once). */
  end: (retryMs: number) => void;
}

/**
 * The SSE streams this instance relays from other instances (a forwarded or handed-over request):
 * none of its own sessions', so a drain ends them apart, with the retry hint, and the clients come
 * back through a peer. A standalone `GET` relayed after the drain is ended once its first chunk
 * (the peer's priming event, which the client resumes from) has passed, so that nothing long-lived
 * keeps the HTTP server from closing.
 *
 * A relayed stream that stays silent for longer than `silenceMs` (the peer writes a keep-alive
 * comment on a stream idle `keepAliveMs`, so at most 1.5 × `keepAliveMs` apart: twice that means
 * the peer is frozen, or the network between the instances holds its bytes) is ended the same
 * way, once its client holds a cursor: a server close with the retry hint, which a client follows
 * by resuming (from the shared store, on whichever instance it lands) without counting a failure
 * (invariant: come-back-later). A stream without an event id cannot be resumed: it is left to its peer.
 */
export class Relays {
  /** Each relayed stream, with the last retry hint the peer wrote on it (its call's pace). */
  private readonly sinks = new Map<SseSink, Relayed>();
  private endedWith: number | undefined;
  private watchdog: ReturnType<typeof setInterval> | undefined;

  /**
   * @param silenceMs a relayed stream silent this long is ended (`0`: never).
   * @param retryMs the retry hint for a stream whose peer wrote none.
   */
  constructor(
    private readonly silenceMs = 0,
    private readonly retryMs = 1_000,
  ) {}

  /** `res`, with its SSE streams tracked. */
  responder(res: CoreResponder, method: string): CoreResponder {
    const endEarly = method.toUpperCase() === 'GET';
    return {
      send: (status, headers, body) => res.send(status, headers, body),
      stream: (headers) => this.track(res.stream(headers), endEarly),
      onClose: res.onClose ? (listener) => res.onClose!(listener) : undefined,
    };
  }

  /**
   * Ends every relayed stream, and the GET streams relayed from now on, with the retry hint its
   * peer last wrote on it, else `retryMs`: an SDK v1 client keeps the last retry it read for all
   * its streams, so the handler's default would set the pace of a call that asked for another.
   */
  endAll(retryMs: number): void {
    this.endedWith = retryMs;
    for (const relayed of [...this.sinks.values()]) relayed.end(relayed.pace ?? retryMs);
  }

  private track(sink: SseSink, endEarly: boolean): SseSink {
    let ended = false;
    const relayed: Relayed = {
      pace: undefined,
      resumable: false,
      writes: 0,
      silentMs: 0,
      end: (retryMs) => {
        if (ended) return;
        ended = true;
        end(sink, retryMs);
      },
    };
    this.sinks.set(sink, relayed);
    this.watch();
    sink.onClose(() => {
      ended = true;
      this.sinks.delete(sink);
      this.unwatch();
    });
    return {
      write: (chunk) => {
        if (ended) return true;
        relayed.writes++;
        const pace = lastRetry(chunk);
        if (pace !== undefined) relayed.pace = pace;
        if (!relayed.resumable && hasId(chunk)) relayed.resumable = true;
        const ok = sink.write(chunk);
        if (endEarly && this.endedWith !== undefined) relayed.end(relayed.pace ?? this.endedWith);
        return ok;
      },
      end: () => {
        if (!ended) sink.end();
        ended = true;
      },
      get bufferedBytes() {
        return sink.bufferedBytes;
      },
      onClose: (listener) => sink.onClose(listener),
      onDrain: sink.onDrain ? (listener) => sink.onDrain!(listener) : undefined,
    };
  }

  /** Starts the watchdog with the first relayed stream: it looks every quarter `silenceMs`. */
  private watch(): void {
    if (this.silenceMs <= 0 || this.watchdog) return;
    const periodMs = Math.max(25, Math.floor(this.silenceMs / 4));
    this.watchdog = setInterval(() => this.check(periodMs), periodMs);
    this.watchdog.unref?.();
  }

  private unwatch(): void {
    if (this.sinks.size > 0 || !this.watchdog) return;
    clearInterval(this.watchdog);
    this.watchdog = undefined;
  }

  /** Counts, per stream, how long nothing came; ends a resumable one silent for `silenceMs` (to 1.25 × that). */
  private check(periodMs: number): void {
    for (const relayed of [...this.sinks.values()]) {
      if (relayed.writes > 0) {
        relayed.writes = 0;
        relayed.silentMs = 0;
        continue;
      }
      relayed.silentMs += periodMs;
      if (relayed.silentMs >= this.silenceMs && relayed.resumable) relayed.end(relayed.pace ?? this.endedWith ?? this.retryMs);
    }
  }
}

/** The value of the last `retry:` field in an SSE chunk, if it has one. */
function lastRetry(chunk: string): number | undefined {
  if (!chunk.includes('retry:')) return undefined;
  let found: number | undefined;
  for (const match of chunk.matchAll(/^retry: ?(\d+)$/gm)) found = Number(match[1]);
  return found;
}

/** Whether an SSE chunk carries an event id (a cursor the client resumes from). */
function hasId(chunk: string): boolean {
  return chunk.includes('id:') && /^id: ?\S/m.test(chunk);
}

function end(sink: SseSink, retryMs: number): void {
  sink.write(retryField(retryMs));
  sink.end();
}
