/**
 * The core's cluster ports, on every in-process adapter, without Redis: two handlers ("A" and "B")
 * share one in-memory store with a live tail and an in-memory session directory, and forward over
 * real HTTP with @mcp-kit/redis' HttpForwarder. What Redis adds is tested in tests/cluster.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ElicitRequestSchema, LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import {
  FORWARDED_HEADER,
  MemoryEventStore,
  type EventStore,
  type SessionCluster,
  type SessionOwner,
  type StreamKey,
  type StreamListener,
  type StreamSubscription,
} from '@mcp-kit/core';
// By path: the root package does not depend on @mcp-kit/redis; the forwarder needs nothing of Redis.
import { HttpForwarder } from '../../packages/redis/src/forward.js';
import { inProcessAdapters, type Adapter, type HarnessOptions, type ServerUnderTest } from '@mcp-kit/testbed/adapters';
import { callTool } from '@mcp-kit/testbed/requests';
import { errorOf, http, openSession } from '@mcp-kit/testbed/fetch-client';
import { RawSession, splitId, type RawSse } from '@mcp-kit/testbed/raw-client';
import { ServerCounter, TwoPhase } from '@mcp-kit/testbed/probes';

/** One memory store seen by every instance, with an in-process live tail (what Redis pub/sub does). */
class SharedStore {
  readonly memory = new MemoryEventStore();
  private readonly tails = new Map<string, Set<{ key: StreamKey; next: number; start: number; listener: StreamListener }>>();

  /** The store as one instance sees it; `subscribes` counts the live tails it opened. */
  view(withSubscribe = true): EventStore & { subscribes: number } {
    const shared = this;
    const view: EventStore & { subscribes: number } = {
      subscribes: 0,
      createStream: (key) => shared.memory.createStream(key),
      append: (key, seq, frame, final) => shared.append(key, seq, frame, final),
      replayAfter: (sessionId, streamId, afterSeq) => shared.replayAfter(sessionId, streamId, afterSeq),
      deleteSession: (sessionId) => shared.deleteSession(sessionId),
      closeTails: (key, afterSeq, retryMs) => shared.closeTails(key, afterSeq, retryMs),
    };
    if (withSubscribe) {
      view.subscribe = (key, afterSeq, listener) => {
        view.subscribes++;
        return shared.subscribe(key, afterSeq, listener);
      };
    }
    return view;
  }

  private append(key: StreamKey, seq: number, frame: string, final: boolean): void {
    this.memory.append(key, seq, frame, final);
    for (const tail of [...(this.tails.get(key.streamId) ?? [])]) {
      if (seq !== tail.next) continue;
      tail.next++;
      tail.listener.frame(frame, seq, final);
      if (final) this.tails.get(key.streamId)?.delete(tail);
    }
  }

  private subscribe(key: StreamKey, afterSeq: number, listener: StreamListener): StreamSubscription {
    const tail = { key, next: afterSeq + 1, start: afterSeq, listener };
    const replay = this.memory.replayAfter(key.sessionId, key.streamId, afterSeq);
    if (replay.ok) for (const frame of replay.frames) listener.frame(frame, tail.next++, replay.complete && tail.next > replay.lastSeq);
    const set = this.tails.get(key.streamId) ?? new Set();
    this.tails.set(key.streamId, set);
    set.add(tail);
    return { cancel: () => set.delete(tail) };
  }

  /** The retry of each stream's last close, as the Redis store keeps it. */
  private readonly retries = new Map<string, number>();

  private replayAfter(sessionId: string, streamId: string, afterSeq: number) {
    const result = this.memory.replayAfter(sessionId, streamId, afterSeq);
    const retryMs = this.retries.get(streamId);
    return result.ok && retryMs !== undefined ? { ...result, retryMs } : result;
  }

  private closeTails(key: StreamKey, afterSeq: number, retryMs: number): void {
    this.retries.set(key.streamId, retryMs);
    for (const tail of [...(this.tails.get(key.streamId) ?? [])]) {
      if (afterSeq <= tail.start || tail.next - 1 < afterSeq) continue;
      this.tails.get(key.streamId)?.delete(tail);
      tail.listener.closed(retryMs);
    }
  }

  private deleteSession(sessionId: string): void {
    this.memory.deleteSession(sessionId);
    for (const set of this.tails.values()) {
      for (const tail of [...set]) {
        if (tail.key.sessionId !== sessionId) continue;
        set.delete(tail);
        tail.listener.end('deleted');
      }
    }
  }
}

/** Who owns which session, and which instances are alive: what Redis keys do in production. */
class Directory {
  readonly owners = new Map<string, { instanceId: string; principal: string | undefined; url: string }>();
  readonly alive = new Set<string>();
  /** When another instance last touched each session. */
  readonly seen = new Map<string, number>();
  down = false;

  cluster(instanceId: string, self: { url: string }): SessionCluster & { forwards: number } {
    const dir = this;
    const forwarder = new HttpForwarder({ instanceId });
    dir.alive.add(instanceId);
    const check = () => {
      if (dir.down) throw new Error('directory unreachable');
    };
    const cluster: SessionCluster & { forwards: number } = {
      forwards: 0,
      directory: {
        writerCheckMs: 50,
        async open(sessionId, principal) {
          check();
          dir.owners.set(sessionId, { instanceId, principal, url: self.url });
        },
        end(sessionId) {
          dir.owners.delete(sessionId);
        },
        touch(sessionId) {
          dir.seen.set(sessionId, Date.now());
        },
        async activeElsewhere(sessionId) {
          return Date.now() - (dir.seen.get(sessionId) ?? 0) < 150;
        },
        close() {
          forwarder.close();
          dir.alive.delete(instanceId);
        },
      },
      owners: {
        async lookupOwner(sessionId): Promise<SessionOwner | undefined> {
          check();
          const record = dir.owners.get(sessionId);
          if (!record) return undefined;
          if (record.instanceId === instanceId) return { instanceId, self: true, principal: record.principal };
          if (!dir.alive.has(record.instanceId)) return undefined;
          return { instanceId: record.instanceId, self: false, principal: record.principal, address: record.url };
        },
        forward(owner, request, responder) {
          cluster.forwards++;
          return forwarder.forward(owner.address as string, request, responder);
        },
      },
    };
    return cluster;
  }
}

interface Pair {
  a: ServerUnderTest;
  b: ServerUnderTest;
  storeA: ReturnType<SharedStore['view']>;
  storeB: ReturnType<SharedStore['view']>;
  clusterA: ReturnType<Directory['cluster']>;
  clusterB: ReturnType<Directory['cluster']>;
  dir: Directory;
}

async function pair(adapter: Adapter, options: { subscribe?: boolean } & HarnessOptions = {}): Promise<Pair> {
  const shared = new SharedStore();
  const dir = new Directory();
  const selfA = { url: '' };
  const selfB = { url: '' };
  const storeA = shared.view(options.subscribe ?? true);
  const storeB = shared.view(options.subscribe ?? true);
  const clusterA = dir.cluster('A', selfA);
  const clusterB = dir.cluster('B', selfB);
  // Tasks across instances need a shared task store: tested with Redis in tests/cluster/tasks.test.ts.
  const both = { ...options, tasks: false, retryMs: 30 };
  const a = await adapter.start({ ...both, eventStore: storeA, cluster: clusterA });
  const b = await adapter.start({ ...both, eventStore: storeB, cluster: clusterB });
  selfA.url = a.url;
  selfB.url = b.url;
  return { a, b, storeA, storeB, clusterA, clusterB, dir };
}

/** A fetch that sends each request to A and B in turn: a load balancer without sticky sessions. */
function alternating(a: string, b: string): typeof fetch & { log: Array<{ to: string; method: string; resume: boolean }> } {
  let turn = 0;
  const log: Array<{ to: string; method: string; resume: boolean }> = [];
  const f = (async (_input: RequestInfo | URL, init?: RequestInit) => {
    const to = turn++ % 2 === 0 ? 'A' : 'B';
    log.push({ to, method: init?.method ?? 'GET', resume: new Headers(init?.headers).has('last-event-id') });
    return fetch(to === 'A' ? a : b, init);
  }) as typeof fetch & { log: typeof log };
  f.log = log;
  return f;
}

/** A session on A whose `two_phase` call produced its first phase, cut by A while its client held still. */
async function firstPhaseCut(pr: Pair, tool: TwoPhase) {
  const session = await RawSession.open(pr.a.url);
  const first = await session.postSse(callTool(2, 'two_phase'));
  await first.next();
  first.pause();
  await tool.firstProduced;
  first.resume();
  expect(await first.end(30_000)).toBe('server');
  return { session, first };
}

/** The sequence numbers of the events these connections carried, in order. */
function seqs(streams: RawSse[]): number[] {
  return streams.flatMap((s) => s.messages.map((m) => splitId(m.id as string).seq));
}

describe.each(inProcessAdapters)('cluster ports: $name', (adapter) => {
  let p: Pair | undefined;
  const clients: Client[] = [];
  afterEach(async () => {
    for (const c of clients.splice(0)) await c.close().catch(() => {});
    await p?.a.close();
    await p?.b.close();
    p = undefined;
  });

  async function sdkClient(pr: Pair) {
    const f = alternating(pr.a.url, pr.b.url);
    const client = new Client({ name: 'cluster', version: '1.0.0' }, { capabilities: { elicitation: {} } });
    await client.connect(new StreamableHTTPClientTransport(new URL(pr.a.url), { fetch: f }));
    clients.push(client);
    const steps: number[] = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      const step = (n.params.data as { step?: number }).step;
      if (typeof step === 'number') steps.push(step);
    });
    return { client, steps, log: f.log };
  }

  it('requests for the other instance are forwarded, resumes are served from the shared store: every step once, in order', async () => {
    p = await pair(adapter);
    const { client, steps, log } = await sdkClient(p);
    const result = await client.callTool(
      { name: 'long_task', arguments: { steps: 24, intervalMs: 15, closeEvery: 3, retryMs: 20 } },
      CallToolResultSchema,
      { timeout: 20_000 },
    );
    expect(result.content).toEqual([{ type: 'text', text: 'completed 24 steps' }]);
    expect(steps).toEqual(Array.from({ length: 24 }, (_, i) => i + 1));
    // initialize went to A, so A owns the session: B forwards and serves resumes itself.
    expect(p.dir.owners.size).toBe(1);
    expect([...p.dir.owners.values()][0]!.instanceId).toBe('A');
    expect(p.clusterB.forwards).toBeGreaterThan(0);
    expect(p.clusterA.forwards).toBe(0);
    expect(log.filter((r) => r.resume && r.to === 'B').length).toBeGreaterThan(0);
    expect(p.storeB.subscribes).toBe(log.filter((r) => r.resume && r.to === 'B').length);
    expect([...p.a.errors, ...p.b.errors]).toEqual([]);
  });

  it("the client's answers to elicitation reach the owner from either instance", async () => {
    p = await pair(adapter);
    const { client } = await sdkClient(p);
    client.setRequestHandler(ElicitRequestSchema, async () => ({
      action: 'accept',
      content: { username: 'ada', email: 'ada@example.com' },
    }));
    for (let i = 0; i < 3; i++) {
      await client.ping();
      const elicited = await client.callTool({ name: 'test_elicitation', arguments: { message: 'who?' } });
      expect(JSON.stringify(elicited.content)).toContain('ada@example.com');
    }
    expect(p.clusterB.forwards).toBeGreaterThanOrEqual(3);
  });

  it('a request another instance forwarded is served here or answered 404, never forwarded again', async () => {
    p = await pair(adapter);
    const { headers } = await openSession(http(p.a.url));
    const res = await http(p.b.url).post({ jsonrpc: '2.0', id: 5, method: 'ping' }, { ...headers, [FORWARDED_HEADER]: 'A' });
    const e = await errorOf(res);
    expect([e.status, e.code]).toEqual([404, -32001]);
    expect(p.clusterB.forwards).toBe(0);
  });

  it('a session whose owner is gone gets 404 on POST, GET and DELETE', async () => {
    p = await pair(adapter);
    const { headers } = await openSession(http(p.a.url));
    p.dir.alive.delete('A');
    const api = http(p.b.url);
    for (const res of [
      await api.post({ jsonrpc: '2.0', id: 5, method: 'ping' }, headers),
      await api.get(headers),
      await api.del(headers),
    ]) {
      const e = await errorOf(res);
      expect([e.status, e.code]).toEqual([404, -32001]);
      expect(e.message).toBe(
        'Session not found: it expired, was deleted, or the server instance that held it is gone; initialize a new session',
      );
    }
  });

  it("an unreachable session directory is a 503 with a JSON-RPC body, for initialize and for another instance's session", async () => {
    p = await pair(adapter);
    const { headers } = await openSession(http(p.a.url));
    p.dir.down = true;
    const init = await http(p.b.url).post({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
    });
    const call = await http(p.b.url).post({ jsonrpc: '2.0', id: 2, method: 'ping' }, headers);
    for (const res of [init, call]) {
      expect(res.headers.get('retry-after')).toBe('1');
      const e = await errorOf(res);
      expect([e.status, e.code, e.message]).toEqual([
        503,
        -32000,
        'Service Unavailable: the session directory is unavailable; retry later',
      ]);
    }
    // The owner still serves its own session: it needs no directory for that.
    expect((await http(p.a.url).post({ jsonrpc: '2.0', id: 3, method: 'ping' }, headers)).status).toBe(200);
    expect(p.b.errors.map((e) => e.message)).toEqual([
      'cluster open failed: directory unreachable',
      'cluster lookupOwner failed: directory unreachable',
    ]);
  });

  it("DELETE through the other instance ends the session on its owner, and that instance's live tails", async () => {
    p = await pair(adapter);
    const { headers } = await openSession(http(p.a.url));
    const call = await http(p.a.url).postSse(callTool(7, 'long_task', { steps: 200, intervalMs: 20 }), headers);
    const priming = await call.next();
    call.abort();
    const tail = await http(p.b.url).getSse({ ...headers, 'last-event-id': priming.id as string });
    await tail.until((m) => m.method === 'notifications/message');
    expect((await http(p.b.url).del(headers)).status).toBe(200);
    await tail.ended_();
    // Ended like a stream of a deleted session on its owner: no retry hint, nothing to come back to.
    expect(tail.blocks.some((b) => b.retry !== undefined && b.data === undefined)).toBe(false);
    expect(p.dir.owners.size).toBe(0);
    expect((await errorOf(await http(p.a.url).post({ jsonrpc: '2.0', id: 1, method: 'ping' }, headers))).status).toBe(404);
  });

  it('a live tail on the other instance ends with the retry hint when the owner disappears', async () => {
    p = await pair(adapter);
    const { headers } = await openSession(http(p.a.url));
    const call = await http(p.a.url).postSse(callTool(7, 'long_task', { steps: 200, intervalMs: 20 }), headers);
    const priming = await call.next();
    call.abort(); // the client's connection drops; it comes back on the other instance
    const tail = await http(p.b.url).getSse({ ...headers, 'last-event-id': priming.id as string });
    await tail.until((m) => m.method === 'notifications/message');
    p.dir.alive.delete('A');
    await tail.ended_(2_000);
    expect(tail.blocks.at(-1)).toMatchObject({ raw: 'retry: 30', retry: 30 });
  });

  it('a client following a long call from the other instance keeps its session from idling out on the owner', async () => {
    p = await pair(adapter, { sessionIdleTtlMs: 200 });
    const { headers } = await openSession(http(p.a.url));
    const call = await http(p.a.url).postSse(callTool(7, 'long_task', { steps: 25, intervalMs: 40 }), headers);
    const priming = await call.next();
    call.abort();
    // Only B sees the client for the next second, five idle TTLs.
    const tail = await http(p.b.url).getSse({ ...headers, 'last-event-id': priming.id as string });
    const messages = await tail.until((m) => m.id === 7, 5_000);
    await tail.ended_();
    const steps = messages
      .filter((b) => b.data && JSON.parse(b.data).method === 'notifications/message')
      .map((b) => JSON.parse(b.data as string).params.data.step);
    expect(steps).toEqual(Array.from({ length: 25 }, (_, i) => i + 1));
    expect(JSON.parse(messages.at(-1)!.data as string).result.content).toEqual([{ type: 'text', text: 'completed 25 steps' }]);
  });

  it('without EventStore.subscribe, a resume on the other instance replays what is stored and ends with the retry hint the tool last set', async () => {
    p = await pair(adapter, { subscribe: false });
    const { headers } = await openSession(http(p.a.url));
    const call = await http(p.a.url).postSse(callTool(7, 'long_task', { steps: 6, intervalMs: 30, closeEvery: 2, retryMs: 20 }), headers);
    const priming = await call.next();
    await call.ended_();
    const resumed = await http(p.b.url).getSse({ ...headers, 'last-event-id': priming.id as string });
    await resumed.ended_();
    const blocks = resumed.blocks;
    // The tool's closeSSEStream asked for 20 ms (the handler's is 30): B primes and ends with it, as A would.
    expect(blocks[0]).toMatchObject({ id: priming.id, retry: 20, data: '' });
    const steps = blocks.filter((b) => b.data).map((b) => JSON.parse(b.data as string).params?.data?.step);
    expect(steps.length).toBeGreaterThanOrEqual(2);
    expect(steps).toEqual(Array.from({ length: steps.length }, (_, i) => i + 1));
    expect(blocks.at(-1)).toMatchObject({ retry: 20 });
  });

  it('a resume on the other instance held up by a slow reader while the owner keeps writing is cut past maxBufferedBytes, and the next resume gets the rest', async () => {
    const phase = 2_000;
    const tool = new TwoPhase(phase);
    p = await pair(adapter, { maxBufferedBytes: 64 * 1024, server: new ServerCounter().factory((server) => tool.register(server)) });
    const { session: s, first } = await firstPhaseCut(p, tool);

    // On B the replay (several MB) waits for the reader; the second phase reaches B's tail meanwhile.
    const onB = new RawSession(p.b.url, s.sessionId);
    const resumed = await onB.get(first.lastEventId);
    await resumed.next();
    resumed.pause();
    tool.release();
    await tool.secondProduced;
    resumed.resume();
    expect(await resumed.end(60_000)).toBe('server');
    // Cut with the retry hint as soon as what waited on B outgrew the mark, mid-replay: B did not
    // hold the owner's 8 MB for a reader that held still (it would cut only once that was flushed).
    expect(resumed.blocks.at(-1)!.retry).toBe(30);
    expect(Math.max(...seqs([resumed]))).toBeLessThan(phase);

    const streams = [first, resumed];
    while (!streams.at(-1)!.messages.some((m) => m.message.id === 2)) {
      const next = await onB.get(streams.at(-1)!.lastEventId);
      expect(await next.end(60_000)).toBe('server');
      expect(next.messages.length, 'a resume that made no progress').toBeGreaterThan(0);
      streams.push(next);
    }
    expect(seqs(streams)).toEqual(Array.from({ length: 2 * phase + 1 }, (_, i) => i + 1));
  }, 120_000);

  it('maxStreamDurationMs counts a resume on the other instance from its start, not from the end of a slow replay', async () => {
    const phase = 2_000;
    const tool = new TwoPhase(phase);
    const server = new ServerCounter().factory((s) => tool.register(s));
    p = await pair(adapter, { maxBufferedBytes: 64 * 1024, maxStreamDurationMs: 300, server });
    const { session: s, first } = await firstPhaseCut(p, tool);

    const resumed = await new RawSession(p.b.url, s.sessionId).get(first.lastEventId);
    await resumed.next();
    resumed.pause();
    // The reader holds still for several stream durations (what is measured here is time itself).
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    resumed.resume();
    expect(await resumed.end(30_000)).toBe('server');
    // Ended at 300 ms, mid-replay: the replay of the first phase never reached its end.
    expect(resumed.blocks.at(-1)!.retry).toBe(30);
    expect(Math.max(...seqs([resumed]))).toBeLessThan(phase);
    tool.release();
  }, 120_000);
});
