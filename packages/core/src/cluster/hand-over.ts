import { ErrorCode, reject, sendRejection, type Rejection } from '../http/errors.js';
import { FORWARDED_HEADER, HANDED_OVER_HEADER, MOVED_HEADER } from '../ports/hops.js';
import type { SessionOwner } from '../ports/owners.js';
import type { CoreRequest, CoreResponder } from '../ports/http.js';
import type { Session } from '../session/session.js';
import { asError } from '../util/errors.js';
import { turnedAway } from '../engine/drain.js';
import { forwardFailure, idOf, notRunAgain, runsWork } from './forward-failure.js';
import type { Forwarding } from './forwarding.js';
import { fromPeer } from './from-peer.js';

/**
 * Forwarding: whether this request is this instance's to serve while it drains: one another
 * instance forwarded here because this instance owns its session (an answer to a question a
 * running call asked, a call on a busy session) is; anything a client sent here directly goes to
 * a peer.
 */
export function servedWhileDraining(state: Forwarding, req: CoreRequest): boolean {
  return fromPeer(state.owners, req, FORWARDED_HEADER);
}

/**
 * Moves a request that reached a draining instance to a live peer, after handing off the session
 * it names if that session is here and idle (the peer restores it). Without a peer: 503 with
 * `Retry-After`, and the client comes back once another instance is up; the same when the peer
 * could not be reached, but a `POST` the peer may have received and run is answered 502.
 */
export async function handOver(
  state: Forwarding,
  req: CoreRequest,
  res: CoreResponder,
  body: string | undefined,
  session?: Session,
): Promise<void> {
  const { ctx, owners } = state;
  // Forwarded here as to the owner of a session this instance has just let go (its call ended and
  // the drain handed it off): the peer that sent it restores it. Handed to a peer again, it would
  // come back here (or, carrying the hand-over mark, end as a 503 for the client).
  if (!session && fromPeer(owners, req, FORWARDED_HEADER)) return sendRejection(res, movedAway(state));
  if (session?.idle && state.directory.letGo) await ctx.registry.letGo(session, ctx.options.retryMs);
  let peers: SessionOwner[] = [];
  try {
    peers = (await owners.peers?.()) ?? [];
  } catch (error) {
    ctx.options.onError(asError(error, 'cluster peers failed'));
  }
  // A request a peer handed over here already: never back and forth.
  if (peers.length === 0 || fromPeer(owners, req, HANDED_OVER_HEADER)) return sendRejection(res, turnedAway(ctx));
  const peer = peers[state.handedOver++ % peers.length]!;
  try {
    const request = { method: req.method.toUpperCase(), headers: req.headers, body, url: req.url, handOver: true };
    const forwarding = owners.forward(peer, request, state.relays.responder(res, req.method));
    state.handingOver.add(forwarding);
    await forwarding.finally(() => state.handingOver.delete(forwarding));
  } catch (error) {
    ctx.options.onError(asError(error, `handing a request over to instance ${peer.instanceId} failed`));
    // The peer may have run it: as a forward to an owner (cluster/forward.ts), never invited again (invariant: at-most-once).
    if (runsWork(req) && forwardFailure(error, ctx.options.jsonResponse === true) === 'unanswered')
      return sendRejection(res, notRunAgain('the server instance this request was handed over to'), idOf(body));
    sendRejection(res, turnedAway(ctx));
  }
}

/** The answer {@link MOVED_HEADER} marks: the forwarding peer's `forward` rejects on it and never relays it. */
function movedAway(state: Forwarding): Rejection {
  return reject(503, ErrorCode.ServerError, 'Service Unavailable: this server instance let the session go; retry', {
    'retry-after': '1',
    [MOVED_HEADER]: state.ctx.instanceId,
  });
}
