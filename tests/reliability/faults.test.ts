/**
 * Faults, against every adapter: a reader that stops reading during a burst, DELETE with streams
 * open, a session that expires while its tool runs, shutdown with streams open, and the races
 * between a resume and the stream it resumes.
 */
import type { ServerResponse } from 'node:http';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { MemoryEventStore } from '@mcp-kit/core';
import { adapters, inProcessAdapters, sharedStarts, type ServerUnderTest } from '@mcp-kit/testbed/adapters';
import { initializeRequest as initialize, callTool as toolCall } from '@mcp-kit/testbed/requests';
import { jsonRpcError, RawSession, send, splitId, type RawSse } from '@mcp-kit/testbed/raw-client';
import { GatedStore, registerBurst, registerTicker, ServerCounter, TwoPhase } from '@mcp-kit/testbed/probes';
import { collect, listenerPid, rssOf } from '@mcp-kit/testbed/memory';
import { count } from '@mcp-kit/testbed/random';
import { metricsSnapshot, total as metricTotal, type TelemetrySnapshot } from '@mcp-kit/testbed/otel';

const MB = 1024 * 1024;
const mb = (bytes: number) => Math.round((bytes / MB) * 10) / 10;

/** Data events of a stream as `[seq, message]`, checking they all belong to one stream token. */
function events(streams: RawSse[]): Array<{ seq: number; message: any }> {
  const out: Array<{ seq: number; message: any }> = [];
  const tokens = new Set<string>();
  for (const s of streams) {
    for (const b of s.blocks) {
      if (!b.data) continue;
      const { token, seq } = splitId(b.id!);
      tokens.add(token);
      out.push({ seq, message: JSON.parse(b.data) });
    }
  }
  expect(tokens.size).toBe(1);
  return out;
}

/**
 * What the OpenTelemetry SDK inside a `next start` (MCP_KIT_OTEL=memory, see apps/next-example/otel.ts)
 * has counted so far: across processes, what a client that holds still cannot see.
 */
async function nextMetrics(url: string): Promise<TelemetrySnapshot> {
  const res = await fetch(`${new URL(url).origin}/mcp-kit/otel`);
  if (!res.ok) throw new Error(`/mcp-kit/otel answered ${res.status}: ${await res.text()}`);
  return { metrics: metricsSnapshot((await res.json()).metrics), spans: [] };
}

/** Samples the server's RSS until stopped: a reading to report, not a timing. */
function rssSampler(pid: number | undefined) {
  collect();
  const read = () => rssOf(pid) ?? 0;
  const baseline = read();
  let peak = baseline;
  const timer = setInterval(() => (peak = Math.max(peak, read())), 20);
  return {
    stop() {
      clearInterval(timer);
      peak = Math.max(peak, read());
      return { baseline, peak, growth: peak - baseline };
    },
  };
}

describe.each(adapters)('faults: $name', (adapter) => {
  let sut: ServerUnderTest | undefined;
  // For the tests whose sessions are their own: `next start` once per set of options (sharedStarts).
  const shared = sharedStarts(adapter);
  afterEach(async () => {
    await sut?.close();
    sut = undefined;
  });
  afterAll(() => shared.closeAll());

  it('DELETE with a standalone, a running and a resumed stream open ends all three cleanly and forgets the session', async () => {
    const servers = new ServerCounter();
    const store = new MemoryEventStore();
    sut = await (adapter.inProcess ? adapter.start({ server: servers.factory(), eventStore: store }) : shared.start());
    const { s, standalone, running, resumed } = await openThreeStreams(sut.url, 20);

    expect((await s.del()).status).toBe(200);
    for (const stream of [standalone, running, resumed]) {
      expect(await stream.end()).toBe('server');
      // Nothing half-written: the last bytes close a complete block.
      expect(stream.partial).toBe('');
    }
    // The id is dead for every method, resumes included; nothing of it is replayed.
    for (const res of [
      await s.post(toolCall(4, 'test_simple_text')),
      await s.del(),
      await send(s.url, { method: 'GET', headers: { ...s.headers, accept: 'text/event-stream', 'last-event-id': resumed.lastEventId! } }),
    ]) {
      expect(res.status).toBe(404);
      expect(jsonRpcError(res).code).toBe(-32001);
    }
    if (adapter.inProcess) {
      await servers.closedAtLeast(1);
      expect(store.stats()).toMatchObject({ streams: 0, events: 0 });
      expect(sut.inProcess!.handler.sessionCount).toBe(0);
    }
  });

  it('a session whose client stays away past the idle TTL expires while its tool runs; a client that keeps resuming keeps it alive', async () => {
    const TTL = 500;
    let stopped!: (info: { ticks: number; reason: unknown }) => void;
    const tickerStopped = new Promise<{ ticks: number; reason: unknown }>((resolve) => (stopped = resolve));
    const servers = new ServerCounter();
    const store = new MemoryEventStore();
    sut = await adapter.start(
      adapter.inProcess
        ? {
            sessionIdleTtlMs: TTL,
            eventStore: store,
            server: servers.factory((server) => registerTicker(server, (ticks, reason) => stopped({ ticks, reason }))),
          }
        : { sessionIdleTtlMs: TTL },
    );

    // A client that resumes at once after every close keeps its session through a call longer than the TTL.
    const busy = await RawSession.open(sut.url);
    const steps = 12;
    const started = Date.now();
    const streams: RawSse[] = [await busy.postSse(toolCall(2, 'long_task', { steps, intervalMs: 90, closeEvery: 1, retryMs: 0 }))];
    for (;;) {
      const last = streams.at(-1)!;
      expect(await last.end()).toBe('server');
      if (last.messages.some((m) => m.message.id === 2)) break;
      streams.push(await busy.get(last.lastEventId));
    }
    expect(Date.now() - started).toBeGreaterThan(TTL);
    const got = events(streams).map((e) => e.message);
    expect(got.filter((m) => m.method).map((m) => m.params.data.step)).toEqual(Array.from({ length: steps }, (_, i) => i + 1));

    // A client that leaves mid-call and stays away: the session expires, its tool is stopped.
    const away = await RawSession.open(sut.url);
    const tool = adapter.inProcess
      ? toolCall(3, 'ticker', { intervalMs: 20 })
      : toolCall(3, 'long_task', { steps: 100_000, intervalMs: 20, closeEvery: 1, retryMs: 60_000 });
    const first = await away.postSse(tool);
    await first.next();
    await first.next();
    const cursor = first.lastEventId!;
    first.abort();
    if (adapter.inProcess) {
      const { reason } = await tickerStopped;
      expect(String(reason)).toMatch(/abort/i);
      await servers.closedAtLeast(1);
      // Its stored events went with it.
      expect(store.replayAfter(away.sessionId, splitId(cursor).token, splitId(cursor).seq)).toEqual({ ok: false, reason: 'unknown' });
    } else {
      // `next start` runs elsewhere: ask until the session is gone. A wrong protocol version is refused
      // after the session lookup and before it counts as activity, so asking does not keep it alive.
      const deadline = Date.now() + 15_000;
      for (;;) {
        const probe = await send(away.url, {
          method: 'GET',
          headers: { ...away.headers, accept: 'text/event-stream', 'mcp-protocol-version': '1999-01-01' },
        });
        if (probe.status === 404) break;
        expect(probe.status).toBe(400);
        if (Date.now() > deadline) throw new Error('session did not expire');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    const late = await send(away.url, {
      method: 'GET',
      headers: { ...away.headers, accept: 'text/event-stream', 'last-event-id': cursor },
    });
    expect(late.status).toBe(404);
    expect(jsonRpcError(late)).toMatchObject({ code: -32001, message: expect.stringMatching(/initialize a new session/) });
  });

  it('a cancelled call gets no response; its stream ends and its id is free again, instead of both being held for the life of the session', async () => {
    sut = await shared.start();
    const s = await RawSession.open(sut.url);
    const call = await s.postSse(toolCall(5, 'long_task', { steps: 10_000, intervalMs: 20 }));
    await call.next();
    await call.next();
    expect((await s.post({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 5, reason: 'user' } })).status).toBe(
      202,
    );
    expect(await call.end()).toBe('server');
    expect(call.partial).toBe('');
    expect(call.messages.some((m) => m.message.id === 5)).toBe(false);
    const again = await s.postSse(toolCall(5, 'test_simple_text'));
    expect(await again.end()).toBe('server');
    expect(again.messages.at(-1)!.message).toMatchObject({ id: 5, result: { content: [{ type: 'text' }] } });
  });

  it('a client that stops reading during a large burst: the live stream is cut with a retry hint, server memory stays bounded, one resume gets everything', async () => {
    const maxBufferedBytes = 256 * 1024;
    const retryMs = 250;
    let produced!: () => void;
    const allProduced = new Promise<void>((resolve) => (produced = resolve));
    // In-process: a probe with 4 KiB events. `next start`: long_task's small events, many of them.
    const [total, size] = adapter.inProcess ? [count(2_000, 8_000), 4096] : [count(40_000, 100_000), 0];
    const store = new MemoryEventStore({ maxBytes: 1024 * MB, maxEventsPerStream: 1_000_000 });
    // `next start` inherits the environment: its OpenTelemetry SDK counts what the test must wait for.
    if (!adapter.inProcess) process.env.MCP_KIT_OTEL = 'memory';
    sut = await adapter
      .start(
        adapter.inProcess
          ? {
              maxBufferedBytes,
              retryMs,
              eventStore: store,
              server: new ServerCounter().factory((server) => registerBurst(server, produced)),
            }
          : { maxBufferedBytes, retryMs, eventStore: { maxBytes: 1024 * MB, maxEventsPerStream: 1_000_000 } },
      )
      .finally(() => delete process.env.MCP_KIT_OTEL);
    // The most any response held unsent, seen at every write the bridge makes.
    let maxHeld = 0;
    sut.inProcess?.server.on('request', (_req, res: ServerResponse) => {
      const write = res.write;
      res.write = function (this: ServerResponse, ...args: unknown[]) {
        const ok = (write as (...a: unknown[]) => boolean).apply(this, args);
        maxHeld = Math.max(maxHeld, this.writableLength);
        return ok;
      } as typeof res.write;
    });

    const s = await RawSession.open(sut.url);
    const rss = rssSampler(sut.inProcess ? process.pid : listenerPid(Number(new URL(sut.url).port)));
    const call = adapter.inProcess
      ? toolCall(2, 'burst', { count: total, size })
      : toolCall(2, 'long_task', { steps: total, intervalMs: 0 });
    const first = await s.postSse(call);
    await first.next();
    first.pause();
    if (adapter.inProcess) {
      await allProduced;
    } else {
      // Across processes the server's metrics say it: the burst stored (every step and the result)
      // and this connection cut as a slow reader.
      for (const deadline = Date.now() + 60_000; ;) {
        const seen = await nextMetrics(sut.url);
        const stored = metricTotal(seen, 'mcp_kit.events.stored');
        const cut = metricTotal(seen, 'mcp_kit.sse.closes', {
          'mcp_kit.stream.kind': 'post',
          'mcp_kit.stream.close_reason': 'slow-reader',
        });
        if (stored >= total + 1 && cut >= 1) break;
        if (Date.now() > deadline) throw new Error(`after 60 s: ${stored} of ${total + 1} events stored, ${cut} slow-reader cut`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    const memory = rss.stop();
    first.resume();
    expect(await first.end(60_000)).toBe('server');

    const firstEvents = first.messages.length;
    // Cut before the result, with the hint, and long before the burst was through.
    expect(first.blocks.at(-1)!.retry).toBe(retryMs);
    expect(first.messages.some((m) => m.message.id === 2)).toBe(false);
    expect(firstEvents).toBeLessThan(total);

    // The replay waits for the reader instead of overflowing the same mark: the whole backlog, many
    // times maxBufferedBytes, comes back on one connection, which then ends after the result.
    const streams = [first];
    while (!streams.at(-1)!.messages.some((m) => m.message.id === 2)) {
      const next = await s.get(streams.at(-1)!.lastEventId);
      expect(await next.end(60_000)).toBe('server');
      expect(next.messages.length, 'a resume that made no progress').toBeGreaterThan(0);
      streams.push(next);
      expect(streams.length, 'the backlog came back over more than one connection').toBe(2);
    }
    const all = events(streams);
    expect(all.map((e) => e.seq)).toEqual(Array.from({ length: total + 1 }, (_, i) => i + 1));
    const logs = all.filter((e) => e.message.method).map((e) => e.message.params.data);
    expect(logs.map((d) => d.i ?? d.step)).toEqual(Array.from({ length: total }, (_, i) => i + 1));

    const frameBytes = Math.max(...first.blocks.map((b) => b.raw.length + 2));
    console.log(
      `[slow reader ${adapter.name}] ${total} events of ${frameBytes} B (${mb(total * frameBytes)} MB); first connection got ${firstEvents} before the cut; ` +
        `${streams.length - 1} resume(s); most held unsent for one response ${adapter.inProcess ? `${mb(maxHeld)} MB` : 'n/a'}; ` +
        `server RSS ${mb(memory.baseline)} → peak ${mb(memory.peak)} MB (+${mb(memory.growth)} MB${adapter.inProcess ? `, store holds ${mb(store.stats().bytes)} MB` : ', next start process'})`,
    );
    if (adapter.inProcess) {
      // Bounded by maxBufferedBytes plus the one frame whose write crossed it (and the retry line).
      expect(maxHeld).toBeLessThanOrEqual(maxBufferedBytes + frameBytes + 64);
      // RSS holds the store (every frame is kept for the resume) and little else.
      expect(memory.growth).toBeLessThan(store.stats().bytes * 3 + 128 * MB);
    }
  }, 120_000);
});

describe.each(inProcessAdapters)('paced replay: $name', (adapter) => {
  let sut: ServerUnderTest | undefined;
  afterEach(async () => {
    await sut?.close();
    sut = undefined;
  });

  it('a resume held up by a slow reader catches up with what the stream sent meanwhile, on the same connection, then ends after the result', async () => {
    const phase = 2_000;
    const tool = new TwoPhase(phase);
    const store = new MemoryEventStore({ maxBytes: 1024 * MB, maxEventsPerStream: 1_000_000 });
    // 8 MB, a wait for the test, 8 MB more, then the result.
    sut = await adapter.start({
      maxBufferedBytes: 64 * 1024,
      eventStore: store,
      server: new ServerCounter().factory((server) => tool.register(server)),
    });
    const s = await RawSession.open(sut.url);
    const first = await s.postSse(toolCall(2, 'two_phase'));
    await first.next();
    first.pause();
    await tool.firstProduced;
    first.resume();
    // Cut at the mark while the client held still.
    expect(await first.end(30_000)).toBe('server');
    expect(first.messages.length).toBeLessThan(phase);

    // The resume's replay (several MB) outgrows the mark as soon as the client holds still: the
    // replay waits. The second phase is produced meanwhile, into the store only.
    const resumed = await s.get(first.lastEventId);
    await resumed.next();
    resumed.pause();
    tool.release();
    await tool.secondProduced;
    resumed.resume();
    expect(await resumed.end(60_000)).toBe('server');

    const all = events([first, resumed]);
    expect(all.map((e) => e.seq)).toEqual(Array.from({ length: 2 * phase + 1 }, (_, i) => i + 1));
    expect(all.at(-1)!.message).toMatchObject({ id: 2, result: { content: [{ type: 'text', text: 'two phases' }] } });
    expect(sut.errors).toEqual([]);
  }, 120_000);
});

describe.each(inProcessAdapters)('shutdown and resume races: $name', (adapter) => {
  let sut: ServerUnderTest | undefined;
  afterEach(async () => {
    await sut?.close();
    sut = undefined;
  });

  it('handler.close() ends every open stream with a retry hint and nothing half-written; the HTTP server then closes by itself; later requests get 503', async () => {
    const retryMs = 1234;
    sut = await adapter.start({ retryMs });
    const { standalone, running, resumed } = await openThreeStreams(sut.url, 5);

    const { handler, server } = sut.inProcess!;
    await handler.close();
    for (const stream of [standalone, running, resumed]) {
      expect(await stream.end()).toBe('server');
      expect(stream.partial).toBe('');
      expect(stream.blocks.at(-1)).toMatchObject({ retry: retryMs, raw: `retry: ${retryMs}` });
      // Every block before the hint is a whole event.
      for (const b of stream.blocks.slice(0, -1)) expect(b.id).toBeDefined();
    }
    // A request that slips in after close() must not start anything the shutdown would wait for.
    const late = await send(sut.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify(initialize()),
    });
    expect(late.status).toBe(503);
    expect(late.headers['retry-after']).toBeDefined();
    expect(jsonRpcError(late).code).toBe(-32000);
    expect(handler.sessionCount).toBe(0);
    // No closeAllConnections(): the server finishes on its own once idle sockets are closed.
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error('HTTP server still has open connections after handler.close()')), 5_000);
      server.close(() => (clearTimeout(t), resolve()));
      server.closeIdleConnections();
    });
  });

  it('a resume that reads the store while its call completes still delivers the result (asynchronous store)', async () => {
    const store = new GatedStore();
    sut = await adapter.start({ eventStore: store });
    const s = await RawSession.open(sut.url);
    const post = await s.postSse(toolCall(2, 'long_task', { steps: 2, intervalMs: 200, closeEvery: 1, retryMs: 0 }));
    expect(await post.end()).toBe('server');
    const finished = store.nextFinal();
    const gate = store.holdNextReplay();
    const resumedP = s.get(post.lastEventId);
    await gate.called;
    // The store answered from before the end; let the call finish (result stored, stream done) first.
    await finished;
    await new Promise((resolve) => setImmediate(resolve));
    gate.release();
    const resumed = await resumedP;
    expect(await resumed.end()).toBe('server');
    const got = resumed.messages.map((m) => m.message);
    expect(got.map((m) => m.params?.data?.step ?? `result ${m.id}`)).toEqual([2, 'result 2']);
  });

  it('a resume whose client left while the store was read does not push out the live connection that replaced it', async () => {
    const store = new GatedStore();
    sut = await adapter.start({ eventStore: store });
    const responses: ServerResponse[] = [];
    sut.inProcess!.server.on('request', (req, res: ServerResponse) => {
      if (req.method === 'GET') responses.push(res);
    });
    const s = await RawSession.open(sut.url);
    const post = await s.postSse(toolCall(2, 'long_task', { steps: 8, intervalMs: 60 }));
    await post.next();
    await post.next();
    post.abort();
    const cursor = post.lastEventId;

    // A resume that stalls in the store; its client gives up and the server notices.
    const gate = store.holdNextReplay();
    const giveUp = new AbortController();
    const stale = s.get(cursor, { signal: giveUp.signal });
    await gate.called;
    giveUp.abort();
    await stale;
    await new Promise((resolve) => (responses[0]!.closed ? resolve(undefined) : responses[0]!.once('close', resolve)));

    // The client's next resume is live; then the stale one gets its answer from the store.
    const live = await s.get(cursor);
    await live.next();
    gate.release();
    expect(await live.end()).toBe('server');
    const got = live.messages.map((m) => m.message);
    expect(got.at(-1)).toMatchObject({ id: 2, result: { content: [{ text: 'completed 8 steps' }] } });
    expect(got.filter((m) => m.method).map((m) => m.params.data.step)).toEqual([2, 3, 4, 5, 6, 7, 8]);
  });

  it("a second live connection for a stream replaces the first, which ends with the stream's retry hint", async () => {
    sut = await adapter.start({ retryMs: 321 });
    const s = await RawSession.open(sut.url);
    const post = await s.postSse(toolCall(2, 'long_task', { steps: 10, intervalMs: 30 }));
    await post.next();
    await post.next();
    post.abort();
    const one = await s.get(post.lastEventId);
    await one.next();
    await one.next();
    const two = await s.get(post.lastEventId);
    await two.next();
    expect(await one.end()).toBe('server');
    expect(one.blocks.at(-1)!.raw).toBe('retry: 321');
    expect(one.partial).toBe('');
    two.abort();
  });
});

/** A session with its standalone GET, a running call, and a call whose POST was cut and resumed: all three open. */
async function openThreeStreams(url: string, intervalMs: number) {
  const s = await RawSession.open(url);
  const standalone = await s.get();
  await standalone.next();
  const running = await s.postSse(toolCall(2, 'long_task', { steps: 10_000, intervalMs }));
  await running.next();
  await running.next();
  const dropped = await s.postSse(toolCall(3, 'long_task', { steps: 10_000, intervalMs }));
  await dropped.next();
  await dropped.next();
  dropped.abort();
  const resumed = await s.get(dropped.lastEventId);
  await resumed.next();
  await resumed.next();
  return { s, standalone, running, resumed };
}
