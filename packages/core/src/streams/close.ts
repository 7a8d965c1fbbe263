/**
 * The two callbacks mcp-kit adds to a request handler's `extra`. The SDK types them as
 * `() => void`; ours also take the retry hint, which the helpers below expose without casts.
 */
export interface SSEStreamControls {
  closeSSEStream?: ((retryMs?: number) => void) | (() => void);
  closeStandaloneSSEStream?: ((retryMs?: number) => void) | (() => void);
}

type CloseFn = (retryMs?: number) => void;

/**
 * Ends the SSE stream that carries the current request's response, so the client reconnects with
 * `GET` + `Last-Event-ID` after `retryMs` (or the handler's `retryMs` when omitted). Events the
 * handler sends afterwards are stored and replayed on the resumed stream (SEP-1699).
 *
 * Returns `false` when there is nothing to close: a JSON response, a stateless handler, or a client
 * on a protocol version before 2025-11-25 (which may not resume a POST stream).
 *
 * @example
 * ```ts source="../../examples/core.examples.ts#closeSSEStream"
 * server.registerTool('report', {}, async (extra) => {
 *   closeSSEStream(extra, 10_000); // let go of the connection; the client polls every 10 s
 *   return { content: [{ type: 'text', text: await longWork() }] };
 * });
 * ```
 */
export function closeSSEStream(extra: SSEStreamControls, retryMs?: number): boolean {
  return callClose(extra.closeSSEStream, retryMs, 'closeSSEStream');
}

/** Ends the session's standalone `GET` stream; the client reconnects after `retryMs`. */
export function closeStandaloneSSEStream(extra: SSEStreamControls, retryMs?: number): boolean {
  return callClose(extra.closeStandaloneSSEStream, retryMs, 'closeStandaloneSSEStream');
}

function callClose(fn: SSEStreamControls['closeSSEStream'], retryMs: number | undefined, name: string): boolean {
  // Validate before the no-callback exit, so a bad value fails in JSON/stateless mode too, not only in production.
  if (retryMs !== undefined && !(Number.isInteger(retryMs) && retryMs >= 0)) {
    throw new RangeError(`${name}: retryMs must be a non-negative integer, got ${String(retryMs)}`);
  }
  if (typeof fn !== 'function') return false;
  const result = (fn as CloseFn)(retryMs) as unknown;
  return result !== false;
}
