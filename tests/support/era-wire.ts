/** What a client's wire must look like in each era, checked on a {@link WireLog} of everything it sent and received. */
import { expect } from 'vitest';
import { MODERN } from '@mcp-kit/testbed/requests';
import type { WireLog } from '@mcp-kit/testbed/wire-log';

/** What a 2026 client's wire must look like: no handshake, no session, every POST stamped. */
export function expectModernWire(wire: WireLog): void {
  expect(wire.posted('initialize')).toEqual([]);
  for (const e of wire.exchanges) {
    expect(e.method, 'a 2026 client only POSTs').toBe('POST');
    expect(e.headers.get('mcp-session-id')).toBeNull();
    expect(e.headers.get('mcp-protocol-version')).toBe(MODERN);
    expect(e.body?.params?._meta?.['io.modelcontextprotocol/protocolVersion']).toBe(MODERN);
    expect(e.status, e.body?.method).toBeOneOf([200, 202]);
  }
}

/** What a 2025 client's wire must look like: one initialize, then a session on every request. */
export function expectLegacyWire(wire: WireLog): void {
  expect(wire.posted('initialize')).toHaveLength(1);
  const after = wire.exchanges.filter((e) => e.body?.method !== 'initialize' && e.method !== 'DELETE');
  for (const e of after) {
    expect(e.headers.get('mcp-session-id'), `${e.method} ${e.body?.method ?? ''}`).toBeTruthy();
    expect(e.body?.params?._meta?.['io.modelcontextprotocol/protocolVersion']).toBeUndefined();
    // A standalone GET may still be waiting for its headers when a quick test asserts.
    if (e.method === 'POST' || e.status !== undefined) expect(e.status, `${e.method} ${e.body?.method ?? ''}`).toBeOneOf([200, 202]);
  }
}
