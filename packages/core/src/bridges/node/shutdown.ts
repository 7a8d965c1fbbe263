import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { McpHandler } from '../../handler.js';

/** What a graceful shutdown reports as it goes (for logs): see {@link GracefulShutdownOptions.onStep}. */
export type ShutdownStep =
  /** The shutdown began: the handler drains (`McpHandler.drain`) with this deadline. */
  | { step: 'draining'; reason: string; deadlineMs: number }
  /** `drain()` resolved: nothing of this instance's work is left here. */
  | { step: 'drained'; ms: number }
  /** Connections still open `graceMs` after the drain: the handler is closed and they are ended. */
  | { step: 'grace-expired'; graceMs: number }
  /** The handler is closed (every stream ended with its retry hint; the cluster left). */
  | { step: 'closed'; ms: number }
  /** A step threw: the shutdown goes on with the next one, and ends with exit code 1. */
  | { step: 'failed'; during: 'drain' | 'close' | 'onShutdown'; error: unknown };

export interface GracefulShutdownOptions {
  /**
   * The signals that start the shutdown. Default `['SIGTERM', 'SIGINT']` (a deploy, Ctrl-C); `[]`
   * for none (call {@link GracefulShutdown.shutdown} yourself). A second signal while the shutdown
   * runs exits at once with code 1 when {@link exit} is on, and is ignored otherwise.
   */
  signals?: readonly NodeJS.Signals[];
  /** How long the calls running here may take to finish (`McpHandler.drain`'s `deadlineMs`). Default `30_000`. */
  deadlineMs?: number;
  /**
   * With a server: how long its connections may stay open after the drain before the handler is
   * closed (which ends every stream with the retry hint) and they are ended. Default `5_000`.
   */
  graceMs?: number;
  /**
   * Exit the process when done: code 0, or 1 when a step failed. Default `true`. `false` leaves the
   * process to you (or to the framework that owns it): {@link GracefulShutdown.done} settles and
   * nothing exits.
   */
  exit?: boolean;
  /** Your own cleanup, after the handler is closed and before the exit (a database pool, a tracer's flush). */
  onShutdown?: () => void | Promise<void>;
  /** Each step as it happens (`draining`, `drained`, `grace-expired`, `closed`, `failed`): for your logs. */
  onStep?: (step: ShutdownStep) => void;
}

/** How a shutdown ended: `exitCode` is what the process exits with (or would, with `exit: false`). */
export interface ShutdownResult {
  /** The signal that started it, or the reason given to {@link GracefulShutdown.shutdown}. */
  reason: string;
  exitCode: 0 | 1;
}

/** What {@link shutdownGracefully} and {@link drainOnSignal} return: the shutdown, to start by hand or await. */
export interface GracefulShutdown {
  /** Starts the shutdown now, as a signal would (once: later calls return the same promise). */
  shutdown(reason?: string): Promise<ShutdownResult>;
  /** Settles when the shutdown is done (before the exit, if any); pending until it starts. */
  readonly done: Promise<ShutdownResult>;
  /** Removes the signal listeners (a shutdown already started goes on). */
  dispose(): void;
}

type HandlerSource = McpHandler | (() => McpHandler | undefined);

/**
 * Graceful shutdown of an MCP endpoint on a `node:http` server (Express, Koa, `http.createServer`),
 * in one call. On `SIGTERM` or `SIGINT`:
 * 1. **drain** (`mcp.drain({ deadlineMs })`): with a cluster, this instance's sessions and requests
 *    move to the others and its polling clients are sent there; alone, new sessions get `503` and
 *    the running calls finish. The server still listens meanwhile, so requests already on their way
 *    are served (handed over). From now on every answer carries `Connection: close`, so a client's
 *    keep-alive connection does not keep bringing requests here.
 * 2. **stop listening** (`server.close()`) and end idle connections; once the last connection has
 *    ended, or `graceMs` after the drain, **close** the handler (every stream still open ends with
 *    the retry hint, and the instance leaves the cluster), then end whatever connection is left.
 * 3. `onShutdown`, then **exit** (0, or 1 if a step failed) unless `exit: false`.
 *
 * Node's own `closeIdleConnections`/`closeAllConnections` do the socket work; the order is what
 * matters: a handler closed before the listener would answer the requests it had accepted `503`,
 * and connections cut before the handler closes would end SSE streams without their `retry:`.
 *
 * @example
 * ```ts source="../../../examples/core.examples.ts#shutdownGracefully"
 * const server = app.listen(3000);
 * shutdownGracefully(server, mcp, { deadlineMs: 25_000 }); // drain, close, exit on SIGTERM/SIGINT
 * ```
 */
export function shutdownGracefully(server: Server, handler: HandlerSource, options: GracefulShutdownOptions = {}): GracefulShutdown {
  return onSignals(handler, options, async (mcp, report) => {
    // From the drain on: each answer closes its connection, so the client's next request opens
    // one the load balancer sends to another instance (and `server.close()` is not held open).
    server.on('request', function closeAfterAnswer(_req: IncomingMessage, res: ServerResponse) {
      if (!res.headersSent) res.setHeader('connection', 'close');
    });
    await drainFor(mcp, options, report);
    await stopListening(server, options.graceMs ?? 5_000, () => closeHandler(mcp, report), report);
  });
}

/**
 * Graceful shutdown where the framework owns the HTTP server (`next start`): on `SIGTERM` or
 * `SIGINT`, drain the handler, then close it (every stream ends with the retry hint, the instance
 * leaves the cluster), then `onShutdown`, then exit unless `exit: false`. `handler` may be a
 * function that returns the handler at signal time, or `undefined` if none was made (a Next route
 * makes its handler at its first request). `graceMs` does not apply.
 */
export function drainOnSignal(handler: HandlerSource, options: GracefulShutdownOptions = {}): GracefulShutdown {
  return onSignals(handler, options, async (mcp, report) => {
    await drainFor(mcp, options, report);
    await closeHandler(mcp, report);
  });
}

type Report = (step: ShutdownStep) => void;

function onSignals(
  handler: HandlerSource,
  options: GracefulShutdownOptions,
  steps: (mcp: McpHandler | undefined, report: Report) => Promise<void>,
): GracefulShutdown {
  const { signals = ['SIGTERM', 'SIGINT'], exit = true } = options;
  checkMs('deadlineMs', options.deadlineMs);
  checkMs('graceMs', options.graceMs);
  let failed = false;
  const report: Report = (step) => {
    if (step.step === 'failed') failed = true;
    try {
      options.onStep?.(step);
    } catch {
      // A logger that throws must not stop the shutdown halfway.
    }
  };
  let settle: (result: ShutdownResult) => void = () => {};
  const done = new Promise<ShutdownResult>((resolve) => (settle = resolve));
  let started: Promise<ShutdownResult> | undefined;
  const shutdown = (reason = 'shutdown') =>
    (started ??= (async function shutDown(): Promise<ShutdownResult> {
      const mcp = typeof handler === 'function' ? handler() : handler;
      report({ step: 'draining', reason, deadlineMs: options.deadlineMs ?? 30_000 });
      await steps(mcp, report);
      try {
        await options.onShutdown?.();
      } catch (error) {
        report({ step: 'failed', during: 'onShutdown', error });
      }
      const result: ShutdownResult = { reason, exitCode: failed ? 1 : 0 };
      settle(result);
      if (exit) process.exit(result.exitCode);
      return result;
    })());
  const onSignal = (signal: NodeJS.Signals) => {
    if (started && exit) process.exit(1);
    void shutdown(signal);
  };
  for (const signal of signals) process.on(signal, onSignal);
  return {
    shutdown,
    done,
    dispose: () => {
      for (const signal of signals) process.off(signal, onSignal);
    },
  };
}

async function drainFor(mcp: McpHandler | undefined, options: GracefulShutdownOptions, report: Report): Promise<void> {
  if (!mcp) return;
  const started = Date.now();
  try {
    await mcp.drain(options.deadlineMs === undefined ? {} : { deadlineMs: options.deadlineMs });
    report({ step: 'drained', ms: Date.now() - started });
  } catch (error) {
    report({ step: 'failed', during: 'drain', error });
  }
}

async function closeHandler(mcp: McpHandler | undefined, report: Report): Promise<void> {
  if (!mcp) return;
  const started = Date.now();
  try {
    await mcp.close();
    report({ step: 'closed', ms: Date.now() - started });
  } catch (error) {
    report({ step: 'failed', during: 'close', error });
  }
}

/**
 * Stops listening, then closes the handler once the last connection has ended, or `graceMs` later
 * with the connections still open (the handler's close ends their streams with the retry hint
 * first, then they are cut). `close` runs once either way.
 */
async function stopListening(server: Server, graceMs: number, close: () => Promise<void>, report: Report): Promise<void> {
  let closing: Promise<void> | undefined;
  const closeOnce = () => (closing ??= close());
  const grace = setTimeout(() => {
    report({ step: 'grace-expired', graceMs });
    void closeOnce().finally(() => server.closeAllConnections());
  }, graceMs);
  await new Promise<void>((resolve) => {
    // An error here only says the server was not listening any more: nothing to wait for then.
    server.close(() => resolve());
    server.closeIdleConnections();
  });
  clearTimeout(grace);
  await closeOnce();
}

function checkMs(name: string, value: number | undefined): void {
  if (value !== undefined && (!Number.isInteger(value) || value < 0))
    throw new RangeError(`shutdownGracefully: ${name} must be a non-negative integer, got ${String(value)}`);
}
