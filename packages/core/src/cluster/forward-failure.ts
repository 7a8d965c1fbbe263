import { ErrorCode, reject, type Rejection } from '../http/errors.js';
import { readableId } from '../http/messages.js';
import type { CoreRequest } from '../ports/http.js';

/**
 * What a request sent to another instance (forwarded to its session's owner, or handed over by a
 * draining instance) became when no answer came back: `unsent` (it never reached that instance,
 * or reached it before anything of it ran: it may be served elsewhere) or `unanswered` (it may
 * have reached it and run there). Read from the error `SessionOwners.forward` rejected with.
 */
export function forwardFailure(error: unknown, jsonResponse: boolean): 'unsent' | 'unanswered' {
  const { maybeReceived, requestSent, received } = (error ?? {}) as { maybeReceived?: unknown; requestSent?: unknown; received?: unknown };
  if (maybeReceived === true || received === true) return 'unanswered';
  // With JSON answers an instance sends nothing until its calls are done: unless it is known to
  // say when it takes a request (`received: false`), a connection that broke after the request
  // went out may have broken under a call that ran (the instance died).
  return requestSent === true && received !== false && jsonResponse ? 'unanswered' : 'unsent';
}

/** A `POST` carries messages whose handlers run (a tool call, an answer to the server): served twice, they would run twice. */
export function runsWork(req: CoreRequest): boolean {
  return req.method.toUpperCase() === 'POST';
}

/**
 * The answer to a `POST` another instance may have run without answering (invariant: at-most-once). No
 * `Retry-After`, and not a `503`: sent again, the request could run twice after all (where the
 * session is restored, or on that instance once back).
 */
export function notRunAgain(who: string): Rejection {
  return reject(
    502,
    ErrorCode.ServerError,
    `Bad Gateway: ${who} did not answer (it stopped answering, or its connection broke while it held the request); it may have received the request, so it is not run again on another instance`,
  );
}

/** The id of a single request in `body`, for its error answer. */
export function idOf(body: string | undefined): string | number | undefined {
  if (body === undefined) return undefined;
  try {
    return readableId(JSON.parse(body));
  } catch {
    return undefined;
  }
}
