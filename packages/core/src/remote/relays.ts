import type { SseSink } from '../ports/http.js';
import { retryField } from '../streams/frames.js';

/**
 * The SSE streams this instance relays from other instances (a forwarded `GET`): long-lived, and
 * none of its own sessions', so a drain ends them apart, with the retry hint; the clients come
 * back through a peer.
 */
export class Relays {
  private readonly sinks = new Set<SseSink>();

  track(sink: SseSink): SseSink {
    this.sinks.add(sink);
    sink.onClose(() => this.sinks.delete(sink));
    return sink;
  }

  endAll(retryMs: number): void {
    for (const sink of [...this.sinks]) {
      sink.write(retryField(retryMs));
      sink.end();
    }
  }
}
