/**
 * The SDK v2 client (`@modelcontextprotocol/client` 2.4.0) against every adapter, in each of its
 * version-negotiation modes: pinned to 2026-07-28, `auto` (probes server/discover; must land on
 * 2026-07-28 here, never silently fall back), and `legacy` (a 2025 session that polls by
 * reconnecting when the server closes its stream).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { adapters, type ServerUnderTest, fixtures, serve, SIMPLE_TEXT } from '@mcp-kit/testbed/adapters';
import { completed, oneTo, POLLED_CLOSES, POLLED_TASK, stepOf, STREAMED_TASK, UNCLOSABLE_TASK } from '@mcp-kit/testbed/long-task';
import { LEGACY, MODERN } from '@mcp-kit/testbed/requests';
import { WireLog } from '@mcp-kit/testbed/wire-log';
import { expectModernWire, expectLegacyWire } from '../support/era-wire.js';

type Mode = 'legacy' | 'auto' | { pin: string };

const modes: Array<{ name: string; mode: Mode; era: string }> = [
  { name: 'pinned 2026-07-28', mode: { pin: MODERN }, era: MODERN },
  { name: 'auto', mode: 'auto', era: MODERN },
  { name: 'legacy', mode: 'legacy', era: LEGACY },
];

async function connect(url: string, mode: Mode) {
  const wire = new WireLog();
  const client = new Client({ name: 'mcp-kit-sdk-v2-client', version: '1.0.0' }, { versionNegotiation: { mode } });
  const steps: number[] = [];
  client.setNotificationHandler('notifications/message', (n) => {
    const step = stepOf(n.params.data);
    if (step !== undefined) steps.push(step);
  });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { fetch: wire.fetch }));
  return { client, wire, steps };
}

/** Calls long_task asking for progress and (on 2026, where it is opt-in per request) logs at `logLevel` (null: none). */
async function longTask(client: Client, args: Record<string, number>, logLevel: string | null = 'info') {
  const progress: number[] = [];
  const _meta = logLevel === null ? undefined : { 'io.modelcontextprotocol/logLevel': logLevel };
  const result = await client.callTool(
    { name: 'long_task', arguments: args, _meta },
    { onprogress: (p) => progress.push(p.progress), timeout: 20_000 },
  );
  return { result, progress };
}

describe.each(fixtures)('$name', (fixture) => {
  describe.each(adapters)('SDK v2 client on $name', (adapter) => {
    let sut: ServerUnderTest;
    const clients: Client[] = [];
    beforeAll(async () => {
      sut = await serve(adapter, fixture);
    });
    afterAll(async () => {
      for (const c of clients) await c.close();
      await sut?.close();
    });

    describe.each(modes)('mode $name', ({ mode, era }) => {
      it(`negotiates ${era} and calls test_simple_text`, async () => {
        const { client, wire } = await connect(sut.url, mode);
        clients.push(client);
        expect(client.getNegotiatedProtocolVersion()).toBe(era);
        const result = await client.callTool({ name: 'test_simple_text', arguments: {} });
        expect(result.content).toEqual([{ type: 'text', text: SIMPLE_TEXT }]);
        expect(result.isError).toBeFalsy();
        if (era === MODERN) {
          expectModernWire(wire);
          // auto and pin both learn the server from server/discover; neither falls back to initialize.
          expect(wire.posted('server/discover')).toHaveLength(1);
        } else {
          expectLegacyWire(wire);
        }
        expect(sut.errors).toEqual([]);
      });

      if (era === MODERN) {
        it('long_task: every step once, in order, as progress and as logs, then the result on the same stream', async () => {
          const { client, wire, steps } = await connect(sut.url, mode);
          clients.push(client);
          const { result, progress } = await longTask(client, STREAMED_TASK);
          expect(result.content).toEqual(completed(STREAMED_TASK.steps));
          expect(progress).toEqual(oneTo(STREAMED_TASK.steps));
          expect(steps).toEqual(oneTo(STREAMED_TASK.steps));
          const [call] = wire.posted('tools/call');
          expect(wire.posted('tools/call')).toHaveLength(1);
          expect(wire.responsesTo(call!.body.id)).toHaveLength(1);
          expectModernWire(wire);
        });

        it('two clients calling at once (both with request id 0) each get only their own notifications and result', async () => {
          const a = await connect(sut.url, mode);
          const b = await connect(sut.url, mode);
          clients.push(a.client, b.client);
          const [ra, rb] = await Promise.all([
            longTask(a.client, { steps: 8, intervalMs: 5 }),
            longTask(b.client, { steps: 5, intervalMs: 8 }),
          ]);
          expect(a.wire.posted('tools/call')[0]!.body.id).toBe(b.wire.posted('tools/call')[0]!.body.id);
          expect(ra.result.content).toEqual(completed(8));
          expect(rb.result.content).toEqual(completed(5));
          expect(ra.progress).toEqual(oneTo(8));
          expect(rb.progress).toEqual(oneTo(5));
          expect(a.steps).toEqual(oneTo(8));
          expect(b.steps).toEqual(oneTo(5));
        });

        it('long_task without an envelope logLevel: progress only, no log notification on the wire', async () => {
          const { client, wire, steps } = await connect(sut.url, mode);
          clients.push(client);
          const { result, progress } = await longTask(client, STREAMED_TASK, null);
          expect(result.content).toEqual(completed(STREAMED_TASK.steps));
          expect(progress).toEqual(oneTo(STREAMED_TASK.steps));
          expect(steps).toEqual([]);
          expect(wire.received().filter((m) => m.method === 'notifications/message')).toEqual([]);
        });

        it('long_task with closeEvery: closeSSEStream declines for a 2026 client, the call stays on its stream', async () => {
          const { client, wire, steps } = await connect(sut.url, mode);
          clients.push(client);
          const { result, progress } = await longTask(client, UNCLOSABLE_TASK);
          expect(result.content).toEqual(completed(UNCLOSABLE_TASK.steps));
          expect(progress).toEqual(oneTo(UNCLOSABLE_TASK.steps));
          expect(steps).toEqual(oneTo(UNCLOSABLE_TASK.steps));
          expect(wire.posted('tools/call')).toHaveLength(1);
          expect(wire.resumes).toEqual([]);
          expectModernWire(wire);
        });
      } else {
        it('long_task with closeEvery: reconnects after each close, every step once and in order, the result once', async () => {
          const { client, wire, steps } = await connect(sut.url, mode);
          clients.push(client);
          const { result, progress } = await longTask(client, POLLED_TASK);
          expect(result.content).toEqual(completed(POLLED_TASK.steps));
          expect(steps).toEqual(oneTo(POLLED_TASK.steps));
          expect(progress).toEqual(oneTo(POLLED_TASK.steps));
          const [call] = wire.posted('tools/call');
          expect(wire.responsesTo(call!.body.id)).toHaveLength(1);
          expect(wire.resumes.length).toBeGreaterThanOrEqual(1);
          expect(wire.resumes.length).toBeLessThanOrEqual(POLLED_CLOSES);
          // Each reconnect picks up from a different point of the stream.
          expect(new Set(wire.resumes.map((r) => r.headers.get('last-event-id'))).size).toBe(wire.resumes.length);
          expectLegacyWire(wire);
          expect(sut.errors).toEqual([]);
        });
      }
    });
  });
});
