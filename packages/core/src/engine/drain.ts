import { ErrorCode, reject, sendRejection, type Rejection } from '../http/errors.js';
import { FORWARDED_HEADER, HANDED_OVER_HEADER, MOVED_HEADER, type SessionOwner } from '../ports/cluster.js';
import type { CoreRequest, CoreResponder } from '../ports/http.js';
import type { Session } from '../session/session.js';
import { asError } from '../util/errors.js';
import { fromPeer } from '../cluster/from-peer.js';
import type { EngineContext } from './context.js';

/**
 * Whether this request is this instance's to serve while it drains: one another instance
 * forwarded here because this instance owns its session (an answer to a question a running call
 * asked, a call on a busy session) is; anything a client sent here directly goes to a peer. In a
 * shared cluster there is no peer to hand it to, and any instance may serve it: it is served here
 * (the load balancer is to stop sending requests to a draining instance; a call still running at
 * the deadline ends with the lost-call error for its client).
 */
export function servedWhileDraining(ctx: EngineContext, req: CoreRequest): boolean {
  return ctx.options.cluster?.shared === true || fromPeer(ctx.options.cluster, req, FORWARDED_HEADER);
}

/**
 * Moves a request that reached a draining instance to a live peer, after handing off the session
 * it names if that session is here and idle (the peer restores it). Without a peer: 503 with
 * `Retry-After`, and the client comes back once another instance is up.
 */
export async function handOver(
  ctx: EngineContext,
  req: CoreRequest,
  res: CoreResponder,
  body: string | undefined,
  session?: Session,
): Promise<void> {
  const cluster = ctx.options.cluster;
  // Forwarded here as to the owner of a session this instance has just let go (its call ended and
  // the drain handed it off): the peer that sent it restores it. Handed to a peer again, it would
  // come back here (or, carrying the hand-over mark, end as a 503 for the client).
  if (!session && cluster && fromPeer(cluster, req, FORWARDED_HEADER)) return sendRejection(res, movedAway(ctx));
  if (session?.idle && cluster?.handOff) await ctx.registry.handOff(session, ctx.options.retryMs);
  let peers: SessionOwner[] = [];
  try {
    peers = (await cluster?.peers?.()) ?? [];
  } catch (error) {
    ctx.options.onError(asError(error, 'cluster peers failed'));
  }
  // A request a peer handed over here already: never back and forth.
  if (peers.length === 0 || !cluster || fromPeer(cluster, req, HANDED_OVER_HEADER)) return sendRejection(res, draining(ctx));
  const peer = peers[ctx.handOvers++ % peers.length]!;
  try {
    const request = { method: req.method.toUpperCase(), headers: req.headers, body, url: req.url, handOver: true };
    const forwarding = cluster.forward(peer, request, ctx.relays.responder(res, req.method));
    ctx.handingOver.add(forwarding);
    await forwarding.finally(() => ctx.handingOver.delete(forwarding));
  } catch (error) {
    ctx.options.onError(asError(error, `handing a request over to instance ${peer.instanceId} failed`));
    sendRejection(res, draining(ctx));
  }
}

/** The answer {@link MOVED_HEADER} marks: the forwarding peer's `forward` rejects on it and never relays it. */
function movedAway(ctx: EngineContext): Rejection {
  return reject(503, ErrorCode.ServerError, 'Service Unavailable: this server instance let the session go; retry', {
    'retry-after': '1',
    [MOVED_HEADER]: ctx.instanceId,
  });
}

export function draining(ctx: EngineContext): Rejection {
  const retryAfter = String(Math.max(1, Math.ceil(ctx.options.retryMs / 1000)));
  return reject(503, ErrorCode.ServerError, 'Service Unavailable: this server instance is shutting down; retry', {
    'retry-after': retryAfter,
  });
}

/**
 * `McpHandler.drain`: the instance stops taking work and lets its sessions go to other instances
 * (see the README's rolling deploys). Clients that poll are sent away at once (their connections
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
  const canHandOff = options.cluster?.handOff !== undefined;
  // With peers, polling clients resume there at once. Alone, this instance is where they come
  // back: their calls' answers, even those written while they were away, are theirs to fetch here.
  if (canHandOff) for (const session of registry.sessions.values()) session.endPollingConnections(options.retryMs);
  const busy = (s: Session) => !s.idle || (!canHandOff && s.routes.awaiting(Date.now()));
  for (;;) {
    if (canHandOff) await Promise.all(registry.idleSessions().map((session) => registry.handOff(session, options.retryMs)));
    // Still running here: a session's call (or, alone, an answer its client has yet to fetch), a 2026
    // request, a task (or, with the in-process task store, a result its client has yet to read).
    const tasksBusy = (ctx.tasks?.running ?? 0) > 0 || (ctx.tasks?.awaitingRead(Date.now()) ?? false);
    const running = [...registry.sessions.values()].some(busy) || ctx.modern.inFlight > 0 || tasksBusy;
    if (!running || Date.now() >= deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  // What is left: idle sessions without a cluster (they end as at close), or calls past the deadline.
  const left = [...registry.sessions.values()];
  if (canHandOff) await Promise.all(left.map((session) => registry.handOff(session, options.retryMs)));
  else for (const session of left) session.terminate(options.retryMs, 'shutdown');
  // What still flows through here for other instances (a followed resume, a relayed stream, a
  // listen stream) ends with the retry hint: its client comes back through a peer.
  ctx.listeners.close();
  for (const conn of [...registry.live]) conn.end(conn.pace ?? options.retryMs, 'shutdown');
  ctx.relays.endAll(options.retryMs);
}
