import { ErrorCode, reject, type Rejection } from '../http/errors.js';
import type { Session } from '../session/session.js';
import type { EngineContext } from './context.js';

/** What a request that a draining instance will not serve hears (alone, or with no peer to hand it to). */
export function turnedAway(ctx: EngineContext): Rejection {
  const retryAfter = String(Math.max(1, Math.ceil(ctx.options.retryMs / 1000)));
  return reject(503, ErrorCode.ServerError, 'Service Unavailable: this server instance is shutting down; retry', {
    'retry-after': retryAfter,
  });
}

/**
 * `McpHandler.drain`: the instance stops taking work and lets its sessions go to other instances
 * (see docs/scaling-out.md). Clients that poll are sent away at once (their connections
 * end with the retry hint; they resume on another instance, which follows the calls still running
 * here from the shared store); idle sessions are handed off as soon as they are idle; at the
 * deadline whatever is left is handed off too (a call still running is lost, and its client hears
 * so from the session's next owner). Without a cluster, new sessions are refused and the drain
 * waits until every call is answered and every answer fetched by its client (or the deadline);
 * `tasks/*` are still served, and a task's result in the in-process store is waited for until read.
 */
export async function drain(ctx: EngineContext, deadlineMs: number): Promise<void> {
  ctx.draining = true;
  const { registry, options } = ctx;
  const deadline = Date.now() + deadlineMs;
  const canHandOff = ctx.cluster?.handsOff ?? false;
  // With peers, polling clients resume there at once. Alone, this instance is where they come
  // back: their calls' answers, even those written while they were away, are theirs to fetch here.
  if (canHandOff) for (const session of registry.sessions.values()) session.endPollingConnections(options.retryMs);
  const busy = (s: Session) => !s.idle || (!canHandOff && s.routes.awaiting(Date.now()));
  for (;;) {
    // Not while a request is on its way to its session: the session it found may look idle yet.
    if (canHandOff && !ctx.arrivals.any) {
      await Promise.all(registry.idleSessions().map((session) => registry.letGo(session, options.retryMs)));
    }
    // Still running here: a request on its way to its session, a session's call (or, alone, an
    // answer its client has yet to fetch), a 2026 request, a task (or, with the in-process task
    // store, a result its client has yet to read).
    const tasksBusy = (ctx.tasks?.running ?? 0) > 0 || (ctx.tasks?.awaitingRead(Date.now()) ?? false);
    const running = ctx.arrivals.any || [...registry.sessions.values()].some(busy) || ctx.modern.inFlight > 0 || tasksBusy;
    if (!running || Date.now() >= deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  // What is left: idle sessions without a cluster (they end as at close), or calls past the deadline.
  const left = [...registry.sessions.values()];
  if (canHandOff) await Promise.all(left.map((session) => registry.letGo(session, options.retryMs)));
  else for (const session of left) session.terminate(options.retryMs, 'shutdown');
  // What still flows through here for other instances (a followed resume, a relayed stream, a
  // listen stream) ends with the retry hint: its client comes back through a peer.
  ctx.listeners.close();
  for (const conn of [...registry.live]) conn.end(conn.pace ?? options.retryMs, 'shutdown');
  ctx.cluster?.endRelayed(options.retryMs);
}
