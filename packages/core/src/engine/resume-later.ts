import { waitingCursor } from '../events/ids.js';
import type { CoreResponder, OutHeaders } from '../ports/http.js';
import { primingEvent, SSE_HEADERS } from '../streams/frames.js';
import { COME_BACK_LATER_MS, pauseBefore } from '../util/retry.js';

/**
 * A resume the cluster cannot serve now answers `200`, not `503`/`502`: Redis is down or failing
 * over, or the instance that writes the stream does not answer. An SDK client counts a non-2xx
 * resume as a failed reconnect and stops listening after two (SDK v1's default), leaving the call
 * to its request timeout, and it ignores `Retry-After`. A `200` stream that ends before the
 * request's response is, to every client that implements SEP-1699, a server close it comes back
 * from after `retry:` without counting a failure: the stream carries only a priming event whose
 * id is the client's own cursor (marked with the count, so the pace backs off on any instance),
 * and a `retry:` that grows. Once the outage ends, the resume is served from that cursor as usual.
 *
 * Returns the responder to serve the resume through: any other answer passes through untouched.
 */
export function resumeLater(res: CoreResponder, cursor: string, waits: number): CoreResponder {
  return {
    send(status: number, headers: OutHeaders, body: string | undefined): void {
      if (status !== 503 && status !== 502) return res.send(status, headers, body);
      const sessionId = headers['mcp-session-id'];
      const sink = res.stream(sessionId === undefined ? SSE_HEADERS : { ...SSE_HEADERS, 'mcp-session-id': sessionId });
      const retryMs = pauseBefore(COME_BACK_LATER_MS, waits);
      sink.write(primingEvent(waitingCursor(cursor, waits + 1), retryMs));
      sink.end();
    },
    stream: (headers) => res.stream(headers),
    ...(res.onClose ? { onClose: (listener: () => void) => res.onClose!(listener) } : {}),
  };
}
