import { ErrorCode } from './errors.js';

/**
 * The catalogue of the errors a call (or a task) is answered with, in place of its result, when
 * the server cannot finish it: something it needed was lost, or a limit stopped it. Each is
 * defined here once, with when it is sent; docs/protocol.md lists them for clients, with what to
 * do. All are JSON-RPC `-32603` (internal error): the request was well formed, the server failed
 * it. Each is stored as its request's answer like any other (invariant: stored-before-sent), so a
 * client away polling reads it when it comes back.
 */
export interface CallError {
  readonly code: number;
  readonly message: string;
  readonly data?: Readonly<Record<string, unknown>>;
}

/**
 * **Lost events.** The event store lost events of a call before its client read them (Redis
 * restarted empty, a failover to a replica that lacked them, or they were evicted): the rest can
 * never reach the client in order (invariant: no-hole). Sent on the call's stream when the client
 * resumes from a cursor the store no longer has (by the instance running or having answered the
 * call; in a shared cluster the writer is asked for it over the bus), and by a writer whose store
 * refuses a frame past one it had acknowledged. The call's tool is stopped.
 */
export const LOST_EVENTS: CallError = {
  code: ErrorCode.InternalError,
  message:
    "Internal error: the event store lost this request's events before the client read them (it restarted empty, or evicted them); send the request again",
};

/**
 * **Lost call.** The instance running the call is gone before it answered: it crashed, or was
 * frozen or cut off past its heartbeat window (invariant: at-most-once: the call is not run
 * again for it). Sent, stored as the stream's final frame, by the instance that takes the session
 * over or restores it, and by the one following the stream for a client when its writer stops
 * beating; a live tail delivers it wherever the client is connected.
 */
export const LOST_CALL: CallError = {
  code: ErrorCode.InternalError,
  message: 'Internal error: the server instance running this request was lost before it answered; send the request again',
};

/**
 * **Unstored events over the limit.** The event store stayed unavailable while the call sent more
 * than `maxUnstoredBytes` of events, which waited in memory (invariant: bounded): the call is
 * stopped, its later events dropped, and this is stored as its answer once the store takes writes
 * again.
 */
export function unstoredBytesOverLimit(maxUnstoredBytes: number): CallError & { data: { maxUnstoredBytes: number } } {
  return {
    code: ErrorCode.InternalError,
    message: `Internal error: the event store was unavailable while this request sent more than maxUnstoredBytes (${maxUnstoredBytes}) of events; it was stopped, send it again`,
    data: { maxUnstoredBytes },
  };
}

/**
 * **Too long.** The call (or task) ran past `maxCallDurationMs`, a deployment's bound under its
 * platform's own limit: it is answered with this (a task fails with it), then its tool cancelled.
 */
export function callTooLong(limitMs: number): CallError & { data: { maxCallDurationMs: number } } {
  return {
    code: ErrorCode.InternalError,
    message: `Internal error: the call ran longer than maxCallDurationMs (${limitMs} ms) and was stopped`,
    data: { maxCallDurationMs: limitMs },
  };
}

/** **Task: server shut down.** A task still running when its instance closes fails with this. */
export const TASK_SERVER_SHUT_DOWN: CallError = {
  code: ErrorCode.InternalError,
  message: 'the server running this task shut down',
};

/**
 * **Task: instance lost.** A `tasks/get` on any instance finds the task's owner gone (it stopped
 * beating) while the task was not in a terminal status: the task fails with this.
 */
export function taskInstanceLost(instanceId: string): CallError {
  return {
    code: ErrorCode.InternalError,
    message: `the server instance running this task (${instanceId}) was lost; its work did not finish`,
  };
}
