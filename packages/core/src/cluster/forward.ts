import { ErrorCode, reject, sendRejection } from '../http/errors.js';
import { principalOf } from '../http/rules.js';
import type { SessionOwner } from '../ports/owners.js';
import type { CoreRequest, CoreResponder } from '../ports/http.js';
import type { Session } from '../session/session.js';
import { asError } from '../util/errors.js';
import { forwardFailure, idOf, notRunAgain, runsWork } from './forward-failure.js';
import type { Forwarding } from './forwarding.js';
import { handOver } from './hand-over.js';
import { takeOver } from './locate.js';

/**
 * What became of a request forwarded to another instance: `relayed` (its answer is on its way to
 * the client), `unsent` (it never reached the owner, or reached it before anything ran: it may be
 * served elsewhere), or `unanswered` (it may have reached the owner and run there, which gave no
 * answer: see `SessionOwners.forward`).
 */
type Forwarded = 'relayed' | 'unsent' | 'unanswered';

/** Serves a request for another instance's session on that instance, relaying its answer as it comes. */
export async function forward(
  state: Forwarding,
  req: CoreRequest,
  res: CoreResponder,
  owner: SessionOwner,
  body: string | undefined,
): Promise<Forwarded> {
  const { ctx } = state;
  const request = { method: req.method.toUpperCase(), headers: req.headers, body, url: req.url };
  const { telemetry } = ctx.options;
  // A relayed stream may be long-lived: a drain ends it with the others (see engine/drain.ts).
  const relaying = state.relays.responder(res, req.method);
  const sessionId = req.headers['mcp-session-id'];
  if (telemetry.on && typeof sessionId === 'string')
    telemetry.emit({ type: 'forward', at: Date.now(), session: telemetry.hash(sessionId), to: owner.instanceId });
  try {
    await state.owners.forward(owner, request, relaying);
    return 'relayed';
  } catch (error) {
    ctx.options.onError(asError(error, `forwarding to instance ${owner.instanceId} failed`));
    return forwardFailure(error, ctx.options.jsonResponse === true);
  }
}

/**
 * Forwards a request to its session's owner. An owner that does not answer may have died: the
 * request waits (at most the cluster's `ownerTimeoutMs`) until the cluster declares it gone, then
 * the session is taken over and restored here and the request served here (the session returned
 * to the caller), or on whichever instance took it over first. Otherwise 502. A `POST` the owner
 * may have received (it froze, or the network held it, after the request was sent) is never
 * served here too (invariant: at-most-once); 502 at once.
 */
export async function forwardOrTakeOver(
  state: Forwarding,
  req: CoreRequest,
  res: CoreResponder,
  remote: { sessionId: string; owner: SessionOwner },
  body: string | undefined,
): Promise<Session | undefined> {
  let forwarded = await forward(state, req, res, remote.owner, body);
  if (forwarded === 'relayed') return undefined;
  if (forwarded === 'unsent' || !runsWork(req)) {
    if (await ownerGone(state, remote.sessionId, remote.owner.instanceId)) {
      const found = await takeOver(state, req, remote.sessionId, principalOf(req.authInfo));
      if (found.kind === 'local') return found.session;
      if (found.kind === 'rejected') return void sendRejection(res, found.rejection);
      if (found.kind === 'moved') return void (await handOver(state, req, res, body));
      forwarded = await forward(state, req, res, found.owner, body);
      if (forwarded === 'relayed') return undefined;
    }
  }
  if (forwarded === 'unanswered' && runsWork(req)) {
    sendRejection(res, notRunAgain('the server instance that owns this session'), idOf(body));
    return undefined;
  }
  const message = 'Bad Gateway: the server instance that owns this session did not answer; retry later';
  sendRejection(res, reject(502, ErrorCode.ServerError, message, { 'retry-after': '1' }));
  return undefined;
}

/** Waits until the cluster stops naming `instanceId` as the session's owner; `false` if it still does after `ownerTimeoutMs`. */
async function ownerGone(state: Forwarding, sessionId: string, instanceId: string): Promise<boolean> {
  const { owners } = state;
  if (!owners.takeOver || !owners.ownerTimeoutMs) return false;
  const deadline = Date.now() + owners.ownerTimeoutMs + 1_000;
  const pause = Math.max(25, Math.min(250, Math.floor(owners.ownerTimeoutMs / 8)));
  for (;;) {
    let owner: SessionOwner | undefined;
    try {
      owner = await owners.lookupOwner(sessionId);
    } catch {
      return false;
    }
    if (!owner || owner.self || owner.instanceId !== instanceId) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
}
