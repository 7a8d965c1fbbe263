// The kit-express-auth row: an authorization server of its own in the server process (a key pair,
// its JWKS and a token under /bench/*), so every MCP request carries a JWT that the handler's
// `jwtVerifier` checks against the JWKS it fetched once and keeps.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { jwtVerifier } from '@mcp-kit/core';
import { SignJWT } from 'jose';

/**
 * The `auth` option and the control plane's part of it. The issuer is this process's own origin
 * (`/bench/jwks` its key set); the token is for `<origin>/mcp`, the resource clients address.
 */
export function benchAuth(env) {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const kid = randomBytes(8).toString('hex');
  const issuer = `http://${env.host}:${env.port}`;
  const jwks = { keys: [{ ...publicKey.export({ format: 'jwk' }), kid, alg: 'ES256', use: 'sig' }] };
  return {
    options: {
      authorizationServers: [issuer],
      verifier: jwtVerifier({ issuer, jwksUri: `${issuer}/bench/jwks` }),
      scopes: ['mcp'],
    },
    jwks,
    /** A token valid for an hour: longer than any run. */
    token: () =>
      new SignJWT({ client_id: 'bench-client', scope: 'mcp' })
        .setProtectedHeader({ alg: 'ES256', kid, typ: 'at+jwt' })
        .setIssuer(issuer)
        .setAudience(`${issuer}/mcp`)
        .setSubject('bench-user')
        .setIssuedAt()
        .setExpirationTime('1h')
        .sign(privateKey),
  };
}
