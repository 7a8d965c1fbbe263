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
  private readonly sinks = new Set<SseSink>();
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

  /** Ends every relayed stream with `retryMs`, and the GET streams relayed from now on. */
  endAll(retryMs: number): void {
    this.endedWith = retryMs;
    for (const sink of [...this.sinks]) end(sink, retryMs);
  }

  private track(sink: SseSink, endEarly: boolean): SseSink {
    this.sinks.add(sink);
    sink.onClose(() => this.sinks.delete(sink));
    if (!endEarly) return sink;
    let ended = false;
    sink.onClose(() => (ended = true));
    return {
      write: (chunk) => {
        if (ended) return true;
        const ok = sink.write(chunk);
        if (this.endedWith !== undefined) {
          ended = true;
          end(sink, this.endedWith);
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

function end(sink: SseSink, retryMs: number): void {
  sink.write(retryField(retryMs));
  sink.end();
}
