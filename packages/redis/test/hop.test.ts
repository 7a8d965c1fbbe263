import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisClient } from '../src/client.js';
import { HopSigner, sharedHopSecret } from '../src/hop.js';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';

const request = { method: 'POST', sessionId: 'session-1' };

/** Resolves once the client is connected (it fails fast, without an offline queue, until then). */
const connected = (client: ReturnType<typeof createRedisClient>) =>
  new Promise<void>((resolve) => (client.status === 'ready' ? resolve() : client.once('ready', () => resolve())));

describe('HopSigner', () => {
  const signer = new HopSigner('a secret of enough length');

  it('verifies what it signed, for that method and session only, within a minute', () => {
    const now = 1_800_000_000_000;
    const value = signer.sign('node-1', request, now);
    expect(value).toMatch(/^node-1\.1800000000000\.[\w-]{43}$/);
    expect(signer.verify(value, request, now + 59_000)).toBe(true);
    expect(signer.verify(value, { method: 'post', sessionId: 'session-1' }, now)).toBe(true);
    expect(signer.verify(value, { method: 'GET', sessionId: 'session-1' }, now)).toBe(false);
    expect(signer.verify(value, { method: 'POST', sessionId: 'session-2' }, now)).toBe(false);
    expect(signer.verify(value, { method: 'POST', sessionId: undefined }, now)).toBe(false);
    expect(signer.verify(value, request, now + 61_000)).toBe(false);
  });

  it('refuses what a client could send: a bare instance id, a forged or truncated MAC, another secret', () => {
    const value = signer.sign('node.with.dots', request);
    expect(signer.verify(value, request)).toBe(true);
    for (const forged of ['node-1', '', '.', 'node-1.123.', value.slice(0, -1), `${value}x`, value.replace('node.with.dots', 'node-2')]) {
      expect(signer.verify(forged, request), forged).toBe(false);
    }
    expect(new HopSigner('another secret of enough length').verify(value, request)).toBe(false);
    expect(new HopSigner().verify(value, request)).toBe(false);
    expect(new HopSigner().sign('node-1', request)).toBe('node-1');
    expect(() => new HopSigner('short')).toThrow(RangeError);
  });
});

describe('sharedHopSecret', () => {
  let redis: TestRedis;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis.stop();
  });

  it('gives every instance the first proposal, and the same again after Redis restarted empty', async () => {
    const a = createRedisClient(redis.url);
    const b = createRedisClient(redis.url);
    try {
      await Promise.all([connected(a), connected(b)]);
      const first = await sharedHopSecret(a, 'mcp-kit:hop-secret');
      expect(first.length).toBeGreaterThanOrEqual(32);
      expect(await sharedHopSecret(b, 'mcp-kit:hop-secret')).toBe(first);
      expect(await sharedHopSecret(b, 'mcp-kit:hop-secret', 'b proposes another one')).toBe(first);
      const reconnected = new Promise<void>((resolve) => a.once('ready', () => resolve()));
      await redis.stop();
      await redis.start();
      await reconnected;
      // The instance that beats first after the restart proposes the secret it holds.
      expect(await sharedHopSecret(a, 'mcp-kit:hop-secret', first)).toBe(first);
    } finally {
      a.disconnect();
      b.disconnect();
    }
  });
});
