import type { CoreResponder, SseSink } from '../ports/http.js';
import { retryField } from '../streams/frames.js';

/**
 * The SSE streams this instance relays from other instances (a forwarded or handed-over request):
 * none of its own sessions', so a drain ends them apart, with the retry hint, and the clients come
 * back through a peer. A standalone `GET` relayed after the drain is ended once its first chunk
 * (the peer's priming event, which the client resumes from) has passed, so that nothing long-lived
 * keeps the HTTP server from closing.
 */
export class Relays {
  /** Each relayed stream, with the last retry hint the peer wrote on it (its call's pace). */
  private readonly sinks = new Map<SseSink, number | undefined>();
  private endedWith: number | undefined;

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
   * its streams, so the handler's default would set the pace of a call that asked for another
   * (issue 20, item 11).
   */
  endAll(retryMs: number): void {
    this.endedWith = retryMs;
    for (const [sink, pace] of [...this.sinks]) end(sink, pace ?? retryMs);
  }

  private track(sink: SseSink, endEarly: boolean): SseSink {
    this.sinks.set(sink, undefined);
    sink.onClose(() => this.sinks.delete(sink));
    let ended = false;
    sink.onClose(() => (ended = true));
    return {
      write: (chunk) => {
        if (ended) return true;
        const pace = lastRetry(chunk);
        if (pace !== undefined && this.sinks.has(sink)) this.sinks.set(sink, pace);
        const ok = sink.write(chunk);
        if (endEarly && this.endedWith !== undefined) {
          ended = true;
          end(sink, this.sinks.get(sink) ?? this.endedWith);
        }
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
}

/** The value of the last `retry:` field in an SSE chunk, if it has one. */
function lastRetry(chunk: string): number | undefined {
  if (!chunk.includes('retry:')) return undefined;
  let found: number | undefined;
  for (const match of chunk.matchAll(/^retry: ?(\d+)$/gm)) found = Number(match[1]);
  return found;
}

function end(sink: SseSink, retryMs: number): void {
  sink.write(retryField(retryMs));
  sink.end();
}
