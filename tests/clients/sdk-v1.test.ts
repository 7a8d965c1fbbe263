/**
 * The SDK v1 client (`@modelcontextprotocol/sdk` 1.32.2: Client + StreamableHTTPClientTransport)
 * against every adapter. It knows only the 2025 era: a session, and SEP-1699 polling when the
 * server closes its stream.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { adapters, type ServerUnderTest, fixtures, serve, SIMPLE_TEXT } from '@mcp-kit/testbed/adapters';
import { completed, oneTo, POLLED_CLOSES, POLLED_TASK, stepOf } from '@mcp-kit/testbed/long-task';
import { LEGACY } from '@mcp-kit/testbed/requests';
import { WireLog } from '@mcp-kit/testbed/wire-log';
import { expectLegacyWire } from '../support/era-wire.js';

async function connect(url: string) {
  const wire = new WireLog();
  const client = new Client({ name: 'mcp-kit-sdk-v1-client', version: '1.0.0' });
  const steps: number[] = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    const step = stepOf(n.params.data);
    if (step !== undefined) steps.push(step);
  });
  const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: wire.fetch });
  await client.connect(transport);
  return { client, transport, wire, steps };
}

describe.each(fixtures)('$name', (fixture) => {
  describe.each(adapters)('SDK v1 client on $name', (adapter) => {
    let sut: ServerUnderTest;
    const clients: Client[] = [];
    beforeAll(async () => {
      sut = await serve(adapter, fixture);
    });
    afterAll(async () => {
      for (const c of clients) await c.close();
      await sut?.close();
    });

    it(`negotiates ${LEGACY} and calls test_simple_text`, async () => {
      const { client, transport, wire } = await connect(sut.url);
      clients.push(client);
      expect(transport.protocolVersion).toBe(LEGACY);
      expect(transport.sessionId).toBeTruthy();
      const result = await client.callTool({ name: 'test_simple_text', arguments: {} });
      expect(result.content).toEqual([{ type: 'text', text: SIMPLE_TEXT }]);
      expect(result.isError).toBeFalsy();
      expectLegacyWire(wire);
      expect(sut.errors).toEqual([]);
    });

    it('long_task with closeEvery: reconnects after each close, every step once and in order, the result once', async () => {
      const { client, wire, steps } = await connect(sut.url);
      clients.push(client);
      const progress: number[] = [];
      const result = await client.callTool({ name: 'long_task', arguments: POLLED_TASK }, CallToolResultSchema, {
        onprogress: (p) => progress.push(p.progress),
        timeout: 20_000,
      });
      expect(result.content).toEqual(completed(POLLED_TASK.steps));
      expect(steps).toEqual(oneTo(POLLED_TASK.steps));
      expect(progress).toEqual(oneTo(POLLED_TASK.steps));
      const [call] = wire.posted('tools/call');
      expect(wire.responsesTo(call!.body.id)).toHaveLength(1);
      expect(wire.resumes.length).toBeGreaterThanOrEqual(1);
      expect(wire.resumes.length).toBeLessThanOrEqual(POLLED_CLOSES);
      expect(new Set(wire.resumes.map((r) => r.headers.get('last-event-id'))).size).toBe(wire.resumes.length);
      expectLegacyWire(wire);
      expect(sut.errors).toEqual([]);
    });
  });
});
