// The headers that mark a request one instance of a cluster sent another (forwarding mode), and
// the answer of a draining one. Their values are untrusted until `SessionOwners.verifyHop` says
// otherwise (invariant: configuration-trusted).

/**
 * Marks a request one instance forwarded to another. The receiver serves it locally (restoring
 * the session from its record if it just let it go) or answers 404: a forwarded request is never
 * forwarded again, so a stale owner record cannot loop. A draining receiver restores nothing: for
 * a session it no longer holds it answers with {@link MOVED_HEADER}.
 */
export const FORWARDED_HEADER = 'mcp-kit-forwarded-by';

/**
 * On the answer of a draining instance to a request forwarded to it as the session's owner, when
 * it has just let the session go: `SessionOwners.forward` must reject instead of relaying it, so
 * the sender waits for the owner record to stop naming that instance and takes the session over.
 */
export const MOVED_HEADER = 'mcp-kit-moved';

/** Marks a request a draining instance handed over to a peer: served as the client's own, never handed back. */
export const HANDED_OVER_HEADER = 'mcp-kit-handed-over-by';
