/**
 * A minimal authorization server for the resource server's tests, run by the test on 127.0.0.1 and
 * a free port: RFC 8414 metadata, a JWKS of keys made with `jose.generateKeyPair`, and an RFC 7662
 * introspection endpoint for opaque tokens. It mints the tokens a test needs, good or bad in one
 * precise way (expired, for another audience, signed with a key it does not publish, …), and
 * counts the requests it answers, so a test can tell that keys were fetched once. The end-to-end
 * tests use a real OpenID provider (auth-server.ts); this one lets a test shape each
 * token by hand.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK, type JWTPayload } from 'jose';

export interface TokenOptions {
  /** Claims over the defaults (iss, aud, sub, client_id, scope, iat, exp one hour on); `undefined` drops one. */
  claims?: Record<string, unknown>;
  /** Sign with a key the JWKS does not publish. */
  unpublishedKey?: boolean;
  /** The JWS header over the defaults (`alg`, `kid`, `typ: at+jwt`). */
  header?: Record<string, unknown>;
}

export interface Introspected {
  active: boolean;
  [member: string]: unknown;
}

export interface TokenIssuer {
  /** The issuer identifier, as its metadata says it (no trailing slash). */
  readonly issuer: string;
  /** Requests answered, by path. */
  readonly hits: Record<string, number>;
  /** The client credentials introspection needs. */
  readonly introspectionClient: { clientId: string; clientSecret: string };
  /** A JWT access token for `audience` (the resource), signed with the published key unless told otherwise. */
  jwt(audience: string, options?: TokenOptions): Promise<string>;
  /** A token signed with `alg: none` (no signature at all). */
  unsigned(audience: string, claims?: Record<string, unknown>): string;
  /** An opaque token whose introspection answers `answer` (`active: true`, `aud`, `exp` … as given). */
  opaque(answer: Introspected): string;
  /** Publishes a new key (and signs with it from now on), as a key rotation does. */
  rotate(): Promise<void>;
  /** Makes `path` (`/jwks`, `/introspect`, the metadata's) answer `status`, as a failing server does; `undefined` serves it again. */
  fail(path: string, status: number | undefined): void;
  close(): Promise<void>;
}

const ALG = 'ES256';

interface Key {
  kid: string;
  privateKey: CryptoKey;
  publicJwk: JWK;
}

async function newKey(): Promise<Key> {
  const { privateKey, publicKey } = await generateKeyPair(ALG);
  const kid = randomBytes(8).toString('hex');
  return { kid, privateKey, publicJwk: { ...(await exportJWK(publicKey)), kid, alg: ALG, use: 'sig' } };
}

export async function startTokenIssuer(): Promise<TokenIssuer> {
  const published: Key[] = [await newKey()];
  const unpublished = await newKey();
  const opaque = new Map<string, Introspected>();
  const hits: Record<string, number> = {};
  const introspectionClient = { clientId: 'mcp-resource-server', clientSecret: randomBytes(16).toString('hex') };
  let issuer = '';

  const failing = new Map<string, number>();
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', issuer).pathname;
    hits[path] = (hits[path] ?? 0) + 1;
    const failure = failing.get(path);
    if (failure !== undefined) return json(res, failure, { error: 'server_error' });
    if (req.method === 'GET' && path === '/.well-known/oauth-authorization-server') {
      return json(res, 200, {
        issuer,
        jwks_uri: `${issuer}/jwks`,
        introspection_endpoint: `${issuer}/introspect`,
        token_endpoint: `${issuer}/token`,
        authorization_endpoint: `${issuer}/authorize`,
        response_types_supported: ['code'],
      });
    }
    if (req.method === 'GET' && path === '/jwks') return json(res, 200, { keys: published.map((k) => k.publicJwk) });
    if (req.method === 'POST' && path === '/introspect') return introspect(req, res);
    json(res, 404, { error: 'not_found' });
  });

  function introspect(req: IncomingMessage, res: ServerResponse): void {
    const expected = `Basic ${Buffer.from(`${introspectionClient.clientId}:${introspectionClient.clientSecret}`).toString('base64')}`;
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      if (req.headers.authorization !== expected) return json(res, 401, { error: 'invalid_client' });
      if (!String(req.headers['content-type']).startsWith('application/x-www-form-urlencoded'))
        return json(res, 400, { error: 'invalid_request' });
      const token = new URLSearchParams(body).get('token') ?? '';
      json(res, 200, opaque.get(token) ?? { active: false });
    });
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const claimsFor = (audience: string, claims: Record<string, unknown> = {}): JWTPayload => {
    const now = Math.floor(Date.now() / 1000);
    const all: Record<string, unknown> = {
      iss: issuer,
      aud: audience,
      sub: 'alice',
      client_id: 'client-a',
      scope: 'mcp',
      iat: now,
      exp: now + 3600,
      ...claims,
    };
    for (const [name, value] of Object.entries(all)) if (value === undefined) delete all[name];
    return all as JWTPayload;
  };

  return {
    get issuer() {
      return issuer;
    },
    hits,
    introspectionClient,
    async jwt(audience, options = {}) {
      const key = options.unpublishedKey ? unpublished : published.at(-1)!;
      return new SignJWT(claimsFor(audience, options.claims))
        .setProtectedHeader({ alg: ALG, kid: key.kid, typ: 'at+jwt', ...options.header } as { alg: string })
        .sign(key.privateKey);
    },
    unsigned(audience, claims) {
      const part = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
      return `${part({ alg: 'none', typ: 'at+jwt' })}.${part(claimsFor(audience, claims))}.`;
    },
    opaque(answer) {
      const token = randomBytes(24).toString('base64url');
      opaque.set(token, answer);
      return token;
    },
    async rotate() {
      published.push(await newKey());
    },
    fail(path, status) {
      if (status === undefined) failing.delete(path);
      else failing.set(path, status);
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** `jwt` with one character of its signature changed. */
export function tamper(jwt: string): string {
  const [header, payload, signature] = jwt.split('.') as [string, string, string];
  const flipped = signature[5] === 'A' ? 'B' : 'A';
  return `${header}.${payload}.${signature.slice(0, 5)}${flipped}${signature.slice(6)}`;
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}
