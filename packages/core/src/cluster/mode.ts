import type { Rejection } from '../http/errors.js';
import type { SessionOwner } from '../ports/owners.js';
import type { CoreRequest, CoreResponder } from '../ports/http.js';
import type { JSONRPCMessage } from '../ports/mcp.js';
import type { Arrival } from '../session/arrivals.js';
import type { CopyRules } from '../session/copy-rules.js';
import type { Session } from '../session/session.js';
import type { SessionRequest } from '../engine/cluster-port.js';

/** Where the session a request names is: here, on another instance (forwarding), or nowhere this request may use it. */
export type Found =
  | { kind: 'local'; session: Session }
  /** Its owner, another live instance, serves it (forwarding). */
  | { kind: 'remote'; sessionId: string; owner: SessionOwner }
  /** Not here, and this instance is draining: it takes no session over; the request goes to a peer (forwarding). */
  | { kind: 'moved' }
  | { kind: 'rejected'; rejection: Rejection };

export function rejected(rejection: Rejection): Found {
  return { kind: 'rejected', rejection };
}

/**
 * What differs between the two cluster modes, as the cluster layer asks it: forwarding
 * (`ForwardingMode`: a session has one owner; peers forward to it) or shared (`SharedMode`: any
 * instance serves a copy restored from the record). `ClusterLayer` picks one, once, from what the
 * `SessionCluster` gives (`owners` or `copies`); what both do alike is the layer's. It also tells
 * the session layer how the mode treats a copy ({@link CopyRules}).
 */
export interface ClusterMode extends CopyRules {
  /** A session this instance does not hold: restored here from its record, on another instance, or nowhere. */
  find(req: CoreRequest, sessionId: string): Promise<Found>;
  /**
   * Before a copy held here serves a request: the directory's check of the copies held here after
   * this instance was away (`SessionDirectory.confirmHeld`), or `undefined` when none is due.
   */
  confirmHeld(deleting: boolean): void | Promise<void>;
  /**
   * Where the request for a session that was found is served: the session to serve it on here, or
   * `undefined` once the mode served it elsewhere (forwarded to the owner, handed to a peer while
   * draining, a stream another instance writes followed from the shared store) or refused it. What
   * is served elsewhere is run under `arrival.elsewhere`: the drain does not wait for it.
   */
  route(req: CoreRequest, res: CoreResponder, found: Found, request: SessionRequest, arrival: Arrival): Promise<Session | undefined>;
  /** The messages of a POST that belong to a call running on another copy go there: those to serve here, or a rejection. */
  routeMessages(session: Session, messages: JSONRPCMessage[]): JSONRPCMessage[] | Promise<JSONRPCMessage[] | Rejection>;
  /**
   * While draining, new work (a new session, a 2026 request): `true` once it went to a live peer
   * (or was refused for want of one), `false` when it is still this instance's to serve.
   */
  handOver(req: CoreRequest, res: CoreResponder, body: () => string): Promise<boolean>;
  /** Whether a drain hands this instance's sessions off to other instances (else it waits for their calls, as alone). */
  readonly handsOff: boolean;
  /** A drain's end: what this instance relays for other instances ends with the retry hint. */
  endRelayed(retryMs: number): void;
  /** Shutdown: resolves once the requests being handed over are answered. */
  leave(retryMs: number): Promise<void>;
}
