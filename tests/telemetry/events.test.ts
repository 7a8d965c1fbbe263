/**
 * The engine's event feed (`McpHandler.observe`), asserted where the OpenTelemetry layer cannot
 * tell a missing event from a quiet server: a call that ends while its client is away still
 * reports the client's time away on the resume that fetches its result.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { closeSSEStream, type EngineEvent } from '@mcp-kit/core';
import { inProcessAdapters, type ServerUnderTest } from '@mcp-kit/testbed/adapters';
import { callTool } from '@mcp-kit/testbed/requests';
import { http, openSession } from '@mcp-kit/testbed/fetch-client';

/** A tool that sends one log, lets go of its stream, and answers when the test releases it. */
function gatedServer(gate: { release?: () => void }) {
  const server = new McpServer({ name: 'gated', version: '1.0.0' }, { capabilities: { logging: {} } });
  server.registerTool('gated', { description: 'answers once released' }, async (extra) => {
    await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data: 'started' } });
    closeSSEStream(extra, 50);
    await new Promise<void>((resolve) => (gate.release = resolve));
    return { content: [{ type: 'text', text: 'released' }] };
  });
  return server;
}

/** Resolves with the first event after now that matches. */
function nextEvent(events: EngineEvent[], listeners: Array<() => void>, match: (e: EngineEvent) => boolean): Promise<EngineEvent> {
  const from = events.length;
  return new Promise((resolve) => {
    const check = () => {
      const found = events.slice(from).find(match);
      if (!found) return;
      listeners.splice(listeners.indexOf(check), 1);
      resolve(found);
    };
    listeners.push(check);
  });
}

describe.each(inProcessAdapters)('engine events on $name', (adapter) => {
  let sut: ServerUnderTest | undefined;
  afterEach(async () => {
    await sut?.close();
    sut = undefined;
  });

  it('a call that completes while its client is away: the resume that fetches the result reports the time away', async () => {
    const gate: { release?: () => void } = {};
    sut = await adapter.start({ server: () => gatedServer(gate) });
    const events: EngineEvent[] = [];
    const listeners: Array<() => void> = [];
    sut.inProcess!.handler.observe((e) => {
      events.push(e);
      for (const l of [...listeners]) l();
    });
    const api = http(sut.url);
    const { headers } = await openSession(api);

    const post = await api.postSse(callTool(2, 'gated'), headers);
    await post.ended_();
    const lastId = post.blocks.filter((b) => b.id).at(-1)!.id!;
    const closedAt = Date.now();
    // The call answers now, with nobody connected: its result is stored, its stream completes.
    const stored = nextEvent(events, listeners, (e) => e.type === 'event');
    gate.release!();
    await stored;

    const resumed = nextEvent(events, listeners, (e) => e.type === 'stream.open' && e.kind === 'resume');
    const resume = await api.getSse({ ...headers, 'last-event-id': lastId });
    const result = await resume.until((m) => m.id === 2);
    expect(result.at(-1)?.data).toContain('released');
    const open = (await resumed) as Extract<EngineEvent, { type: 'stream.open' }>;
    expect(open.awayMs).toBeGreaterThanOrEqual(0);
    expect(open.awayMs!).toBeLessThanOrEqual(Date.now() - closedAt + 1_000);
    // Once per close: a second resume of the same cursor has no time away to report.
    const again = nextEvent(events, listeners, (e) => e.type === 'stream.open' && e.kind === 'resume');
    const second = await api.getSse({ ...headers, 'last-event-id': lastId });
    await second.until((m) => m.id === 2);
    expect(((await again) as Extract<EngineEvent, { type: 'stream.open' }>).awayMs).toBeUndefined();
  });
});
