import type { CoreResponder, HeaderMap } from './http.js';

/**
 * The cluster port: how several instances of one MCP endpoint share sessions without sticky
 * sessions. A session lives (server, tool calls, transport) on the instance that answered its
 * `initialize`, its *owner*; any other instance that gets a request for it either forwards the
 * request to the owner or, for a `GET` + `Last-Event-ID`, serves the resume itself from a shared
 * {@link EventStore} (replay, then `subscribe` for the live tail).
 *
 * The engine only calls these methods; how owners are recorded and reached (Redis and an internal
 * URL in `@mcp-kit/redis`) is the implementation's business. Every method may reject: the engine
 * answers the request with 503 and reports the error through `onError`.
 */
export interface SessionCluster {
  /**
   * Records this instance as the owner of a new session, before the `initialize` response goes out
   * (so the client's next request finds it wherever it lands). `principal` is the identity that
   * created it (`undefined` without auth); other instances compare it like the owner does.
   */
  claim(sessionId: string, principal: string | undefined): Promise<void>;
  /** The session ended here (DELETE, idle expiry, shutdown): forget its owner. */
  release(sessionId: string): void | Promise<void>;
  /**
   * The owner of a session this instance does not hold; `undefined` when there is none (never
   * existed, deleted, expired, or its instance is gone), which the engine answers with 404 so the
   * client starts a new session.
   */
  lookupOwner(sessionId: string): Promise<SessionOwner | undefined>;
  /**
   * Serves the request on the owner and relays its answer, a JSON body or an SSE stream, through
   * `responder`, as it comes. Must add {@link FORWARDED_HEADER} so the owner never forwards it again.
   * Rejects only if nothing was sent (the engine then answers 502).
   */
  forward(owner: SessionOwner, request: ForwardedRequest, responder: CoreResponder): Promise<void>;
  /**
   * How often, in ms, a resume served here for another instance's session checks that the owner
   * is still there (when it is gone the stream ends and the client's next resume gets 404) and
   * calls `touch`. Default `5_000`.
   */
  readonly ownerCheckMs?: number;
  /**
   * Optional: a client of the session is connected here (a resumed stream served for its owner).
   * Called when such a resume starts and every `ownerCheckMs` while it lasts.
   */
  touch?(sessionId: string): void | Promise<void>;
  /**
   * Optional: whether another instance `touch`ed the session within the last few `ownerCheckMs`.
   * The owner asks before it expires a session that looks idle here, so a client following a
   * long tool call from another instance keeps its session alive.
   */
  activeElsewhere?(sessionId: string): Promise<boolean>;
  /** Optional: this instance's id, as other instances name it (task records carry their owner's). */
  readonly instanceId?: string;
  /**
   * Optional: whether an instance still beats. A task whose owning instance is gone is reported
   * `failed` instead of `working` forever.
   */
  instanceAlive?(instanceId: string): Promise<boolean>;
  /** Stops heartbeats and gives up ownership; called by `McpHandler.close()` after the sessions closed. */
  close?(): void | Promise<void>;
}

export interface SessionOwner {
  /** The owning instance's id. */
  instanceId: string;
  /** True when the record names this instance although the session is not here (a stale record). */
  self: boolean;
  /** The principal that created the session (see {@link SessionCluster.claim}). */
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
}

/**
 * Marks a request one instance forwarded to another. The receiver serves it locally or answers
 * 404: a forwarded request is never forwarded again, so a stale owner record cannot loop.
 */
export const FORWARDED_HEADER = 'mcp-kit-forwarded-by';
