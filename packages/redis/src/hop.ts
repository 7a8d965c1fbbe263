import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Redis } from 'ioredis';

/** How far a hop's timestamp may be from this instance's clock: a forward is received within its request. */
const MAX_SKEW_MS = 60_000;

/**
 * Signs and checks the header one instance puts on a request it forwards or hands over to
 * another (`mcp-kit-forwarded-by` / `mcp-kit-handed-over-by`): `<instanceId>.<ms>.<hmac>`, the
 * HMAC-SHA256 of the instance, the time, the method and the session id with a secret the
 * instances share. Without it any client could send the header itself and be served as a peer's
 * forward: skip a draining instance's hand-over, or the owner lookup (invariant: configuration-trusted).
 */
export class HopSigner {
  private secret: Buffer | undefined;

  constructor(secret?: string) {
    if (secret !== undefined) this.setSecret(secret);
  }

  /** Whether there is a secret yet (until then nothing verifies, so every request counts as a client's). */
  get ready(): boolean {
    return this.secret !== undefined;
  }

  setSecret(secret: string): void {
    if (secret.length < 16) throw new RangeError('hopSecret: use at least 16 characters (e.g. 32 random bytes, base64)');
    this.secret = Buffer.from(secret, 'utf8');
  }

  /** The header value for a request `instanceId` sends on; the bare id while there is no secret. */
  sign(instanceId: string, request: { method: string; sessionId: string | undefined }, now = Date.now()): string {
    if (!this.secret) return instanceId;
    return `${instanceId}.${now}.${this.mac(instanceId, now, request)}`;
  }

  verify(value: string, request: { method: string; sessionId: string | undefined }, now = Date.now()): boolean {
    if (!this.secret) return false;
    const macAt = value.lastIndexOf('.');
    const timeAt = value.lastIndexOf('.', macAt - 1);
    if (timeAt <= 0) return false;
    const instanceId = value.slice(0, timeAt);
    const at = Number(value.slice(timeAt + 1, macAt));
    if (!Number.isSafeInteger(at) || Math.abs(now - at) > MAX_SKEW_MS) return false;
    const given = Buffer.from(value.slice(macAt + 1), 'utf8');
    const expected = Buffer.from(this.mac(instanceId, at, request), 'utf8');
    return given.length === expected.length && timingSafeEqual(given, expected);
  }

  private mac(instanceId: string, at: number, request: { method: string; sessionId: string | undefined }): string {
    return createHmac('sha256', this.secret!)
      .update(`${instanceId}\n${at}\n${request.method.toUpperCase()}\n${request.sessionId ?? ''}`)
      .digest('base64url');
  }
}

/**
 * The secret every instance on this Redis shares, made by the first instance that asks: `SET NX`
 * of `proposal` (this instance's current secret, or a new random one), then `GET`. An instance
 * that held a secret before Redis restarted empty proposes it again, so the cluster keeps one.
 * The key has no TTL: it is one small value, and eviction must not change it under the instances.
 */
export async function sharedHopSecret(client: Redis, key: string, proposal = randomBytes(32).toString('base64url')): Promise<string> {
  await client.set(key, proposal, 'NX');
  const secret = await client.get(key);
  if (!secret) throw new Error(`${key}: no hop secret after SET NX`);
  return secret;
}
