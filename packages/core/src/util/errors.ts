/** Any thrown value as an `Error`, its message prefixed with what was being done when it was thrown. */
export function asError(error: unknown, context?: string): Error {
  const e = error instanceof Error ? error : new Error(String(error));
  if (context) e.message = `${context}: ${e.message}`;
  return e;
}

/**
 * Calls `fn`, routing a throw or a rejection to `onError` (prefixed with `context`): for side work
 * whose failure must not reach the request that triggered it (store cleanup, cluster release).
 */
export function settle(fn: () => void | Promise<unknown>, onError: (error: Error) => void, context: string): void {
  try {
    const result = fn();
    if (result) result.catch((error: unknown) => onError(asError(error, context)));
  } catch (error) {
    onError(asError(error, context));
  }
}
