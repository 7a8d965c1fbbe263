import { LOST_EVENTS, unstoredBytesOverLimit } from '../http/call-errors.js';
import type { JSONRPCMessage, RequestId } from '../ports/mcp.js';
import type { ResolvedOptions } from '../options.js';
import type { Inbound } from '../sdk/extra.js';
import type { AppendHooks, Stream } from '../streams/stream.js';

/** What ending a session's calls needs of it. */
export interface CallsOf {
  readonly closed: boolean;
  send(message: JSONRPCMessage): Promise<void>;
  dispatch(messages: JSONRPCMessage[], inbound: Inbound): void;
}

/**
 * Ends requests that can never be answered properly: each gets `error` on its own stream (stored
 * like any answer, so a client away polling reads it when it comes back), then is cancelled at
 * the server as if its client had (the tools' signals abort; the SDK answers none of them).
 * Resolves once the answers are stored.
 */
export function answerAndCancel(session: CallsOf, ids: RequestId[], error: { code: number; message: string }): Promise<unknown> {
  const stored = Promise.all(ids.map((id) => session.send({ jsonrpc: '2.0', id, error })));
  cancelCalls(session, ids, error.message);
  return stored;
}

/** Cancels `ids` at the session's server as if its client had: the tools' signals abort. */
function cancelCalls(session: CallsOf, ids: RequestId[], reason: string): void {
  const cancels = ids.map((requestId) => ({ jsonrpc: '2.0' as const, method: 'notifications/cancelled', params: { requestId, reason } }));
  session.dispatch(cancels, { headers: {} });
}

/**
 * Another instance owns the stream's session now, or answered the stream (this one was frozen or
 * cut off past its heartbeat window): the client already heard its answer there, so the calls
 * still running here stop, unanswered (invariant: at-most-once: a tool must not run on, twice in effect).
 */
export function stopTakenOverCalls(session: CallsOf, stream: Stream, options: ResolvedOptions): void {
  const ids = [...stream.pending];
  options.onError(new Error(`another instance took over a stream of this session; its ${ids.length} running request(s) here are stopped`));
  if (ids.length > 0) cancelCalls(session, ids, 'another instance answered this request');
}

/**
 * The store lost frames of the stream it had acknowledged, so nothing later can be stored: its calls
 * end now with {@link LOST_EVENTS}, told by this instance to a client that resumes (the answers go
 * where an answer given while the client was away goes), and their tools are stopped.
 */
export function endStoreLostCalls(session: CallsOf, stream: Stream, options: ResolvedOptions): void {
  const ids = [...stream.pending];
  options.onError(new Error(`the event store lost acknowledged events of ${ids.length} running request(s); answered with an error`));
  if (ids.length > 0) void answerAndCancel(session, ids, LOST_EVENTS);
}

/** An outage held more of a stream's events than `maxUnstoredBytes`: its calls end (invariant: bounded). */
export function endUnstoredCalls(session: CallsOf, stream: Stream, options: ResolvedOptions): void {
  const ids = [...stream.pending];
  const { maxUnstoredBytes } = options;
  options.onError(
    new Error(`the event store was down while ${ids.length} request(s) sent more than maxUnstoredBytes (${maxUnstoredBytes}); stopped`),
  );
  if (ids.length > 0) void answerAndCancel(session, ids, unstoredBytesOverLimit(maxUnstoredBytes));
}

/** What the streams of `session` report to it as they append: built once per session. */
export function appendHooks(session: CallsOf, options: ResolvedOptions, onFinal: (stream: Stream) => void): AppendHooks {
  return {
    onError: (error) => options.onError(error),
    onFinal,
    onLost: (stream) => endUnstoredCalls(session, stream, options),
    onTakenOver: (stream) => stopTakenOverCalls(session, stream, options),
    onStoreLost: (stream) => endStoreLostCalls(session, stream, options),
    abandoned: () => session.closed,
    maxUnstoredBytes: options.maxUnstoredBytes,
    telemetry: options.telemetry,
  };
}
