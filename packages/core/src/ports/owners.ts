import type { Restored } from './record.js';
import type { CoreResponder, HeaderMap } from './http.js';

/**
 * Forwarding mode (see `SessionCluster`): a session lives (server, tool calls, transport) on its
 * *owner*, the instance that answered its `initialize` or took it over; any other instance that
 * gets a request for it forwards the request there. How owners are recorded and reached (Redis and
 * an internal URL in `@mcp-kit/redis`) is the implementation's business.
 */
export interface SessionOwners {
  /**
   * The owner of a session this instance does not hold; `undefined` when there is none (never
   * existed, deleted, expired, or its instance is gone). The engine then takes the session over
   * (`takeOver`) and restores it here from its record, or, without one, answers 404 so the client
   * starts a new session.
   */
  lookupOwner(sessionId: string): Promise<SessionOwner | undefined>;
  /**
   * Serves the request on the owner and relays its answer, a JSON body or an SSE stream, through
   * `responder`, as it comes. Must add `FORWARDED_HEADER` so the owner never forwards it again.
   * Rejects only if nothing was relayed (the engine then answers 502, or restores the session here
   * once the owner is declared gone). When the owner may have received the request although no
   * answer came (it froze, or the network between the instances holds the bytes), the error has
   * `maybeReceived: true`: the engine then never serves a `POST` of it here (invariant:
   * at-most-once) and answers 502 at once. When the connection broke after the whole request went
   * out and before any answer, the error has `requestSent: true`: the owner may have read it and
   * died while it ran, or closed the connection unread as it stopped. With `jsonResponse` (an owner
   * answers only once its calls are done) the engine then treats a `POST` as `maybeReceived`,
   * unless the error also says `received: false`: the owner is known to acknowledge every forwarded
   * request before it runs anything (`CoreResponder.acknowledge`) and did not acknowledge this one
   * (`received: true` when it did). With SSE answers (an owner sends its answer's head before its
   * calls run) it serves it here once the owner is gone.
   */
  forward(owner: SessionOwner, request: ForwardedRequest, responder: CoreResponder): Promise<void>;
  /**
   * Optional, with the directory's `saveRecord`: takes over a session whose owner is gone (or let
   * it go), for `principal`, to restore it here. Atomic, so of several instances racing for one
   * session exactly one gets the record; the others get the winner as `owner` (and forward to it).
   * `undefined` when there is no such session. Without it a session ends with its owner.
   */
  takeOver?(sessionId: string, principal: string | undefined): Promise<TakeOver | undefined>;
  /**
   * How long after an instance stops answering it counts as gone (`lookupOwner` stops naming it).
   * A request forwarded to an owner that does not answer waits this long for it to be declared
   * gone, then takes the session over here. Default `0` (no waiting: 502).
   */
  readonly ownerTimeoutMs?: number;
  /** Optional: the other live instances (a draining instance hands requests over to one of them). */
  peers?(): Promise<SessionOwner[]>;
  /**
   * Optional: whether a `FORWARDED_HEADER` or `HANDED_OVER_HEADER` value was written by
   * an instance of this cluster (e.g. an HMAC over the request with a secret the instances share).
   * A request whose value fails is served as the client's own. Without it any value is trusted,
   * which is safe only where clients cannot send these headers to the instances (invariant:
   * configuration-trusted).
   */
  verifyHop?(value: string, request: { method: string; sessionId: string | undefined }): boolean;
}

/** What a take-over found: the record (the session is this instance's now), the owner that won the race, or another principal's session. */
export type TakeOver = Restored | { owner: SessionOwner };

export interface SessionOwner {
  /** The owning instance's id. */
  instanceId: string;
  /** True when the record names this instance although the session is not here (a stale record). */
  self: boolean;
  /** The principal that created the session (see `SessionDirectory.open`). */
  principal: string | undefined;
  /** Where to reach the owner, for `forward` (e.g. its internal URL). Opaque to the engine. */
  address?: string;
}

/** A request to replay on the owner: the client's method, headers and body (already read here). */
export interface ForwardedRequest {
  method: string;
  /** The client's headers, lower-cased (hop-by-hop headers are the forwarder's to drop). */
  headers: HeaderMap;
  /** The JSON body of a POST; `undefined` for GET and DELETE. */
  body: string | undefined;
  /** The URL the client asked for, if the adapter knows it (its query string goes along). */
  url?: URL | undefined;
  /**
   * A draining instance hands the request over to a peer, which serves it as if it had come from
   * the client (it may restore the session, or forward it back to its owner): `HANDED_OVER_HEADER`
   * instead of `FORWARDED_HEADER`.
   */
  handOver?: boolean;
}
