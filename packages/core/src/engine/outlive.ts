import type { CoreRequest } from '../ports/http.js';
import type { ResolvedOptions } from '../options.js';
import { asError } from '../util/errors.js';

/** The JSON-RPC error a call or task gets when it runs past `maxCallDurationMs`. */
export function callTooLong(limitMs: number): { code: number; message: string; data: { maxCallDurationMs: number } } {
  return {
    code: -32603,
    message: `Internal error: the call ran longer than maxCallDurationMs (${limitMs} ms) and was stopped`,
    data: { maxCallDurationMs: limitMs },
  };
}

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
