type CloseFn = (retryMs?: number) => unknown;

/**
 * A request handler's context, of either SDK major, as far as closing streams goes: SDK v1's
 * `extra` (`extra.closeSSEStream`) or SDK v2's `ctx` (`ctx.http.closeSSE`). mcp-kit hands both the
 * same hooks; the SDKs type them as `() => void`, ours also take the retry hint, which the helpers
 * below pass without casts.
 */
export type SSEStreamControls =
  | { closeSSEStream?: CloseFn; closeStandaloneSSEStream?: CloseFn }
  | { http?: { closeSSE?: CloseFn; closeStandaloneSSE?: CloseFn } | undefined };

/**
 * Lets go of the connection that carries the current request's response; the call goes on.
 *
 * - A client of the 2025-11-25 era reconnects with `GET` + `Last-Event-ID` after `retryMs` (or
 *   the handler's `retryMs`) and gets every event it missed, then the rest live (SEP-1699).
 * - A client of the 2026-07-28 era has no resumable streams: the call stays on its stream.
 *
 * Returns `true` when the stream was closed. `false` when there is nothing to close or the client
 * could not come back: a JSON response, a stateless handler, a client on a protocol version before
 * 2025-11-25 (see `pollPre20251125Clients`), a 2026-07-28 client, or a request that is already answered. A
 * context that carries no close hook at all (the server is not served by mcp-kit) also gives
 * `false`, with a one-time warning, since that is a setup mistake.
 *
 * @example
 * ```ts source="../../examples/core.examples.ts#closeSSEStream"
 * server.registerTool('report', {}, async (extra) => {
 *   closeSSEStream(extra, 10_000); // let go of the connection; the client polls every 10 s
 *   return { content: [{ type: 'text', text: await longWork() }] };
 * });
 * ```
 */
export function closeSSEStream(ctx: SSEStreamControls, retryMs?: number): boolean {
  return callClose(ctx, 'closeSSEStream', 'closeSSE', retryMs);
}

/**
 * Ends the session's standalone `GET` stream; the client reconnects after `retryMs`. Returns `false`
 * when there is none (or, as {@link closeSSEStream}, nothing the client would come back to).
 */
export function closeStandaloneSSEStream(ctx: SSEStreamControls, retryMs?: number): boolean {
  return callClose(ctx, 'closeStandaloneSSEStream', 'closeStandaloneSSE', retryMs);
}

const warned = new Set<string>();

function callClose(
  ctx: SSEStreamControls,
  v1Name: 'closeSSEStream' | 'closeStandaloneSSEStream',
  v2Name: 'closeSSE' | 'closeStandaloneSSE',
  retryMs: number | undefined,
): boolean {
  // Validate before the no-hook exit, so a bad value fails in JSON/stateless mode too, not only in production.
  if (retryMs !== undefined && !(Number.isInteger(retryMs) && retryMs >= 0)) {
    throw new RangeError(`${v1Name}: retryMs must be a non-negative integer, got ${String(retryMs)}`);
  }
  const c = ctx as { closeSSEStream?: CloseFn; closeStandaloneSSEStream?: CloseFn; http?: Record<string, CloseFn | undefined> };
  const fn = c[v1Name] ?? c.http?.[v2Name];
  if (typeof fn !== 'function') {
    if (!warned.has(v1Name)) {
      warned.add(v1Name);
      console.warn(
        `[mcp-kit] ${v1Name}() found no close hook on this context, so it closes nothing and returns false. Pass the ` +
          "request handler's own context (SDK v1 `extra`, SDK v2 `ctx`) of a server that an mcp-kit handler serves.",
      );
    }
    return false;
  }
  return fn(retryMs) !== false;
}
