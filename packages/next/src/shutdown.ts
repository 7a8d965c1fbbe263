// `@mcp-kit/next/shutdown`: the graceful shutdown of a `next start` process, for
// `instrumentation.ts` (Node.js runtime only: it registers signal listeners and may exit).
import type { McpHandler } from '@mcp-kit/core';
import { drainOnSignal, type GracefulShutdown, type GracefulShutdownOptions } from '@mcp-kit/core/node';
import { cached } from './cache.js';

export type { GracefulShutdown, GracefulShutdownOptions, ShutdownResult, ShutdownStep } from '@mcp-kit/core/node';

/**
 * On `SIGTERM` or `SIGINT`, drains the handler the route made with `getOrCreate(name, …)`, then
 * closes it (every stream ends with the retry hint; with `@mcp-kit/redis` the instance leaves the
 * cluster). A route makes its handler at its first request: if none came, there is nothing to drain.
 *
 * `next start` handles those signals itself unless `NEXT_MANUAL_SIG_HANDLE=true`: it stops listening
 * at once and exits once its last connection has ended, which can cut a drain that still talks to
 * Redis short. Start Next with `NEXT_MANUAL_SIG_HANDLE=true`: this then exits (0) once the handler is
 * closed. Without it, Next exits, and `exit` defaults to `false`. Options as `drainOnSignal`'s in
 * `@mcp-kit/core/node` (`deadlineMs`, `signals`, `onShutdown`, `onStep`, `exit`).
 *
 * @example
 * ```ts source="../examples/next.examples.ts#drainOnShutdown"
 * // instrumentation.ts
 * export async function register() {
 *   if (process.env.NEXT_RUNTIME === 'nodejs') (await import('@mcp-kit/next/shutdown')).drainOnShutdown('mcp');
 * }
 * ```
 */
export function drainOnShutdown(name: string, options: GracefulShutdownOptions = {}): GracefulShutdown {
  return drainOnSignal(() => cached<McpHandler>(name), { exit: Boolean(process.env.NEXT_MANUAL_SIG_HANDLE), ...options });
}
