import { callTooLong } from '../http/call-errors.js';
import type { CoreRequest } from '../ports/http.js';
import { answerAndCancel } from '../session/end-calls.js';
import type { ResolvedOptions } from '../options.js';
import type { Session } from '../session/session.js';
import type { Stream } from '../streams/stream.js';
import { asError } from '../util/errors.js';

/**
 * Work that may outlive the response that started it (a call whose stream the tool closed, a task):
 * registered with the platform's `waitUntil` (the request's own, else the handler's) and ended by
 * `expire` past `maxCallDurationMs`. Returns what to call when it ends, or `undefined` when neither
 * is set (nothing is allocated then).
 */
export function outlive(options: ResolvedOptions, req: CoreRequest, expire: (limitMs: number) => void): (() => void) | undefined {
  const waitUntil = req.waitUntil ?? options.waitUntil;
  const limitMs = options.maxCallDurationMs;
  if (waitUntil === undefined && limitMs === undefined) return undefined;
  let settle: (() => void) | undefined;
  if (waitUntil !== undefined) {
    const work = new Promise<void>((resolve) => (settle = resolve));
    try {
      waitUntil(work);
    } catch (error) {
      options.onError(asError(error, 'waitUntil failed'));
    }
  }
  const timer = limitMs === undefined ? undefined : setTimeout(() => expire(limitMs), limitMs);
  return () => {
    clearTimeout(timer);
    settle?.();
  };
}

/**
 * The requests of `stream` may outlive its response (serverless: the platform freezes an instance once its responses are done): they are registered
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
 * is cancelled.
 */
function expire(options: ResolvedOptions, session: Session, stream: Stream, limitMs: number): void {
  const ids = [...stream.pending];
  if (session.closed || ids.length === 0) return;
  const error = callTooLong(limitMs);
  options.onError(new Error(`${ids.length} request(s) ran past maxCallDurationMs (${limitMs} ms): answered with an error`));
  void answerAndCancel(session, ids, error);
}
