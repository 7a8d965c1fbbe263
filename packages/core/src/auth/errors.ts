/**
 * What a {@link TokenVerifier} throws for a token it refuses: expired, not yet valid, issued for
 * another resource or by another issuer, badly signed, revoked, unknown. The request is answered
 * `401` with `WWW-Authenticate: Bearer error="invalid_token"` and this error's message as the
 * `error_description`, so say what is wrong with the token and nothing it contains. Anything else a
 * verifier throws counts as the verifier failing (the authorization server is unreachable): `503`,
 * reported to `onError`.
 *
 * @example
 * ```ts source="../../examples/core.examples.ts#InvalidTokenError"
 * const verifier: TokenVerifier = async (token) => {
 *   const session = await sessions.lookup(token);
 *   if (!session) throw new InvalidTokenError('unknown or revoked access token');
 *   return { token, clientId: session.clientId, scopes: session.scopes, extra: { sub: session.userId } };
 * };
 * ```
 */
export class InvalidTokenError extends Error {
  override readonly name = 'InvalidTokenError';
}

/**
 * What a {@link TokenVerifier} throws for a valid token that lacks scopes it requires (as
 * `jwtVerifier`'s `requiredScopes` does): `403` with `error="insufficient_scope"` and `scope=` the
 * scopes named here, so the client can ask for them.
 */
export class InsufficientScopeError extends Error {
  override readonly name = 'InsufficientScopeError';
  constructor(
    readonly scopes: string[],
    message = `the access token lacks the scope ${scopes.join(' ')}`,
  ) {
    super(message);
  }
}
