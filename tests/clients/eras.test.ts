/**
 * Version negotiation of a real client against an endpoint that serves one era only (the `eras`
 * option), on every adapter: the SDK v2 client in `auto` must land on the era served, a pinned
 * 2026 client must refuse a legacy-only endpoint, a legacy client a modern-only one. The era
 * checks run before any server is built, so one fixture is enough.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { adapters, type ServerUnderTest, fixtures, serve, SIMPLE_TEXT } from '@mcp-kit/testbed/adapters';
import { LEGACY, MODERN } from '@mcp-kit/testbed/requests';
import { WireLog } from '@mcp-kit/testbed/wire-log';
import { expectModernWire } from '../support/era-wire.js';

type Mode = 'legacy' | 'auto' | { pin: string };

const endpoints = [
  { name: 'legacy-only endpoint', eras: ['legacy' as const], served: LEGACY },
  { name: 'modern-only endpoint', eras: ['modern' as const], served: MODERN },
];

function newClient(mode: Mode) {
  return new Client({ name: 'mcp-kit-eras-client', version: '1.0.0' }, { versionNegotiation: { mode } });
}

describe.each(adapters)('SDK v2 client on $name', (adapter) => {
  describe.each(endpoints)('$name', ({ eras, served }) => {
    let sut: ServerUnderTest;
    const clients: Client[] = [];
    beforeAll(async () => {
      sut = await serve(adapter, fixtures.at(-1)!, { eras });
    });
    afterAll(async () => {
      for (const c of clients) await c.close();
      await sut?.close();
    });

    it(`auto lands on ${served} and calls a tool`, async () => {
      const wire = new WireLog();
      const client = newClient('auto');
      clients.push(client);
      await client.connect(new StreamableHTTPClientTransport(new URL(sut.url), { fetch: wire.fetch }));
      expect(client.getNegotiatedProtocolVersion()).toBe(served);
      const result = await client.callTool({ name: 'test_simple_text', arguments: {} });
      expect(result.content).toEqual([{ type: 'text', text: SIMPLE_TEXT }]);
      // The probe is always a 2026 request; on a legacy-only endpoint the session follows it.
      expect(wire.posted('server/discover')).toHaveLength(1);
      if (served === MODERN) {
        expectModernWire(wire);
      } else {
        expect(wire.posted('initialize')).toHaveLength(1);
        expect(wire.posted('tools/call')[0]!.headers.get('mcp-session-id')).toBeTruthy();
        expect(wire.posted('tools/call')[0]!.body.params._meta?.['io.modelcontextprotocol/protocolVersion']).toBeUndefined();
      }
    });

    const refused: Mode = served === MODERN ? 'legacy' : { pin: MODERN };
    it(`a ${served === MODERN ? 'legacy' : 'pinned 2026-07-28'} client is refused, and says so`, async () => {
      const wire = new WireLog();
      const client = newClient(refused);
      clients.push(client);
      await expect(client.connect(new StreamableHTTPClientTransport(new URL(sut.url), { fetch: wire.fetch }))).rejects.toThrow();
      // The first request (initialize, or the server/discover probe) names the versions served.
      const [first] = wire.exchanges;
      expect(first!.body.method).toBe(served === MODERN ? 'initialize' : 'server/discover');
      expect(first!.status).toBe(400);
      const [error] = wire.received();
      expect(error.id).toBe(first!.body.id);
      expect(error.error.code).toBe(-32022);
      expect(error.error.data.supported).toContain(served);
      expect(wire.posted('tools/call')).toEqual([]);
    });
  });
});
