import { ErrorCode, reject, sendRejection, type Rejection } from '../http/errors.js';
import { FORWARDED_HEADER, HANDED_OVER_HEADER, MOVED_HEADER, type SessionOwner } from '../ports/cluster.js';
import type { CoreRequest, CoreResponder } from '../ports/http.js';
import type { Session } from '../session/session.js';
import { asError } from '../util/errors.js';
import { draining } from '../engine/drain.js';
import { forwardFailure, idOf, notRunAgain, runsWork } from './forward-failure.js';
import { fromPeer } from './from-peer.js';
import type { ClusterState } from './state.js';

/**
 * Whether this request is this instance's to serve while it drains: one another instance
 * forwarded here because this instance owns its session (an answer to a question a running call
 * asked, a call on a busy session) is; anything a client sent here directly goes to a peer. In a
 * shared cluster there is no peer to hand it to, and any instance may serve it: it is served here
 * (the load balancer is to stop sending requests to a draining instance; a call still running at
 * the deadline ends with the lost-call error for its client).
 */
export function servedWhileDraining(layer: ClusterState, req: CoreRequest): boolean {
  return layer.cluster.shared === true || fromPeer(layer.cluster, req, FORWARDED_HEADER);
}

/**
 * Moves a request that reached a draining instance to a live peer, after handing off the session
 * it names if that session is here and idle (the peer restores it). Without a peer: 503 with
 * `Retry-After`, and the client comes back once another instance is up; the same when the peer
 * could not be reached, but a `POST` the peer may have received and run is answered 502.
 */
export async function handOver(
  layer: ClusterState,
  req: CoreRequest,
  res: CoreResponder,
  body: string | undefined,
  session?: Session,
): Promise<void> {
  const { ctx, cluster } = layer;
  // Forwarded here as to the owner of a session this instance has just let go (its call ended and
  // the drain handed it off): the peer that sent it restores it. Handed to a peer again, it would
  // come back here (or, carrying the hand-over mark, end as a 503 for the client).
  if (!session && fromPeer(cluster, req, FORWARDED_HEADER)) return sendRejection(res, movedAway(layer));
  if (session?.idle && cluster.handOff) await ctx.registry.handOff(session, ctx.options.retryMs);
  let peers: SessionOwner[] = [];
  try {
    peers = (await cluster.peers?.()) ?? [];
  } catch (error) {
    ctx.options.onError(asError(error, 'cluster peers failed'));
  }
  // A request a peer handed over here already: never back and forth.
  if (peers.length === 0 || fromPeer(cluster, req, HANDED_OVER_HEADER)) return sendRejection(res, draining(ctx));
  const peer = peers[layer.handOvers++ % peers.length]!;
  try {
    const request = { method: req.method.toUpperCase(), headers: req.headers, body, url: req.url, handOver: true };
    const forwarding = cluster.forward(peer, request, layer.relays.responder(res, req.method));
    layer.handingOver.add(forwarding);
    await forwarding.finally(() => layer.handingOver.delete(forwarding));
  } catch (error) {
    ctx.options.onError(asError(error, `handing a request over to instance ${peer.instanceId} failed`));
    // The peer may have run it: as a forward to an owner (cluster/forward.ts), never invited again.
    if (runsWork(req) && forwardFailure(error, ctx.options.jsonResponse === true) === 'unanswered')
      return sendRejection(res, notRunAgain('the server instance this request was handed over to'), idOf(body));
    sendRejection(res, draining(ctx));
  }
}

/** The answer {@link MOVED_HEADER} marks: the forwarding peer's `forward` rejects on it and never relays it. */
function movedAway(layer: ClusterState): Rejection {
  return reject(503, ErrorCode.ServerError, 'Service Unavailable: this server instance let the session go; retry', {
    'retry-after': '1',
    [MOVED_HEADER]: layer.ctx.instanceId,
  });
}
