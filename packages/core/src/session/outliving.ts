import { callTooLong, outlive } from '../engine/outlive.js';
import type { ResolvedOptions } from '../options.js';
import type { CoreRequest } from '../ports/http.js';
import type { Stream } from '../streams/stream.js';
import type { Session } from './session.js';

/**
 * The requests of `stream` may outlive its response (serverless, issue 21): they are registered
 * with the platform's `waitUntil` until answered or the session ends, and are answered with an
 * error past `maxCallDurationMs`. Nothing happens when neither is set.
 */
export function keepAlive(options: ResolvedOptions, session: Session, stream: Stream, req: CoreRequest): void {
  const end = outlive(options, req, (limitMs) => expire(options, session, stream, limitMs));
  if (end) session.routes.outlive(stream, end);
}

/**
 * Past `maxCallDurationMs`: each request still running on `stream` is answered with the error
 * (stored like any answer, so a client away polling reads it when it comes back), then its tool
 * is cancelled (the SDK sends nothing for a cancelled request).
 */
function expire(options: ResolvedOptions, session: Session, stream: Stream, limitMs: number): void {
  const ids = [...stream.pending];
  if (session.closed || ids.length === 0) return;
  const error = callTooLong(limitMs);
  options.onError(new Error(`${ids.length} request(s) ran past maxCallDurationMs (${limitMs} ms): answered with an error`));
  for (const id of ids) void session.send({ jsonrpc: '2.0', id, error });
  const reason = error.message;
  session.dispatch(
    ids.map((requestId) => ({ jsonrpc: '2.0' as const, method: 'notifications/cancelled', params: { requestId, reason } })),
    { headers: {} },
  );
}
