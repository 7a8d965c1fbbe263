// The verbs against a fake cluster port, without HTTP: a request goes into McpHandler.handle as a
// CoreRequest and its answer comes out of a CoreResponder, while the fake SessionCluster records
// each call the cluster layer makes. What the verbs ask of each mode, call by call; what Redis and
// real instances add is tested in tests/cluster and tests/faults.
import { describe, expect, it, vi } from 'vitest';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  createMcpHandler,
  MemoryEventStore,
  type ClusterMessage,
  type CoreRequest,
  type CoreResponder,
  type EventStore,
  type McpHandler,
  type OutHeaders,
  type RestoreRecord,
  type SessionCluster,
  type SessionDirectory,
  type SessionOwner,
  type SseSink,
} from '../src/index.js';
import { eventId, randomId } from '../src/events/ids.js';
import { messageEvent } from '../src/streams/frames.js';

const VERSION = '2025-11-25';
const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: VERSION, capabilities: {}, clientInfo: { name: 'verbs-test', version: '1.0.0' } },
} as const;
const RECORD: RestoreRecord = { initialize: INITIALIZE, protocolVersion: VERSION };
const callTool = (id: number, name: string) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: {} } });

/** One answer of the engine, as a bridge would write it: a complete response, or an SSE stream. */
class Answer implements CoreResponder {
  status: number | undefined;
  headers: OutHeaders = {};
  body: string | undefined;
  readonly chunks: string[] = [];
  ended = false;
  private readonly waiters: Array<{ test: () => boolean; resolve: () => void }> = [];
  private readonly closeListeners: Array<() => void> = [];

  send(status: number, headers: OutHeaders, body: string | undefined): void {
    this.status = status;
    this.headers = headers;
    this.body = body;
    this.ended = true;
    this.changed();
  }

  stream(headers: OutHeaders): SseSink {
    this.status = 200;
    this.headers = headers;
    const answer = this;
    return {
      write(chunk) {
        answer.chunks.push(chunk);
        answer.changed();
        return true;
      },
      end() {
        answer.ended = true;
        for (const listener of answer.closeListeners.splice(0)) listener();
        answer.changed();
      },
      bufferedBytes: 0,
      onClose(listener) {
        answer.closeListeners.push(listener);
      },
    };
  }

  /** The JSON-RPC messages written on the stream so far. */
  get messages(): Array<{ id?: unknown; result?: unknown; error?: unknown; method?: string }> {
    // A priming event's data is empty.
    const data = this.chunks.flatMap((chunk) => [...chunk.matchAll(/^data:(.*)$/gm)].map((m) => m[1]!.trim()));
    return data.filter((text) => text !== '').map((text) => JSON.parse(text) as { id?: unknown; result?: unknown });
  }

  /** Resolves once `test` holds (checked now and after every write). */
  until(test: () => boolean): Promise<void> {
    if (test()) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ test, resolve }));
  }

  private changed(): void {
    for (const waiter of [...this.waiters]) {
      if (!waiter.test()) continue;
      this.waiters.splice(this.waiters.indexOf(waiter), 1);
      waiter.resolve();
    }
  }
}

function request(method: string, headers: Record<string, string>, body?: unknown): CoreRequest {
  const text = body === undefined ? '' : JSON.stringify(body);
  return {
    method,
    headers: { host: 'localhost', accept: 'application/json, text/event-stream', 'content-type': 'application/json', ...headers },
    readBody: async () => ({ ok: true, text }),
  };
}

async function serve(mcp: McpHandler, method: string, headers: Record<string, string>, body?: unknown): Promise<Answer> {
  const answer = new Answer();
  await mcp.handle(request(method, headers, body), answer);
  return answer;
}

/** A store every instance would share: the memory store, seen through an object that is not one. */
function sharedStore(): EventStore & { memory: MemoryEventStore } {
  const memory = new MemoryEventStore();
  return {
    memory,
    createStream: (key) => memory.createStream(key),
    append: (key, seq, frame, final) => memory.append(key, seq, frame, final),
    replayAfter: vi.fn((sessionId: string, streamId: string, afterSeq: number) => memory.replayAfter(sessionId, streamId, afterSeq)),
    deleteSession: (sessionId) => memory.deleteSession(sessionId),
  };
}

/** A directory that keeps records, and records each call made to it. */
function fakeDirectory(): SessionDirectory & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    instanceId: 'here',
    open: async (sessionId) => void calls.push(`open ${sessionId}`),
    end: (sessionId) => void calls.push(`end ${sessionId}`),
    letGo: async (sessionId) => void calls.push(`letGo ${sessionId}`),
    saveRecord: async (sessionId) => void calls.push(`saveRecord ${sessionId}`),
  };
}

/** A server whose `wait` tool runs until `release` is called, and whose `quick` tool answers at once. */
function gatedServer(): { factory: () => McpServer; started: Promise<void>; release: () => void } {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let started!: () => void;
  const running = new Promise<void>((resolve) => (started = resolve));
  const factory = () => {
    const server = new McpServer({ name: 'verbs-test', version: '1.0.0' });
    server.registerTool('wait', { description: 'runs until released' }, async () => {
      started();
      await gate;
      return { content: [{ type: 'text', text: 'released' }] };
    });
    server.registerTool('quick', { description: 'answers at once' }, async () => ({ content: [{ type: 'text', text: 'quick' }] }));
    return server;
  };
  return { factory, started: running, release };
}

/** Opens a session on `mcp` (initialize, then notifications/initialized); its id. */
async function openSession(mcp: McpHandler): Promise<string> {
  const init = await serve(mcp, 'POST', {}, INITIALIZE);
  await init.until(() => init.messages.some((m) => m.id === 1));
  const sessionId = init.headers['mcp-session-id']!;
  const headers = { 'mcp-session-id': sessionId, 'mcp-protocol-version': VERSION };
  const initialized = await serve(mcp, 'POST', headers, { jsonrpc: '2.0', method: 'notifications/initialized' });
  expect(initialized.status).toBe(202);
  return sessionId;
}

describe('the verbs in forwarding mode (owners)', () => {
  function forwarding(ownerOf: (sessionId: string) => SessionOwner | undefined) {
    const directory = fakeDirectory();
    const forwards: Array<{ owner: string; method: string; body: string | undefined }> = [];
    const lookups: string[] = [];
    const cluster: SessionCluster = {
      directory,
      owners: {
        lookupOwner: async (sessionId) => {
          lookups.push(sessionId);
          return ownerOf(sessionId);
        },
        forward: async (owner, forwarded, responder) => {
          forwards.push({ owner: owner.instanceId, method: forwarded.method, body: forwarded.body });
          responder.send(200, { 'content-type': 'application/json' }, JSON.stringify({ jsonrpc: '2.0', id: 7, result: { from: 'B' } }));
        },
        takeOver: async () => undefined,
      },
    };
    const store = sharedStore();
    const { factory } = gatedServer();
    const mcp = createMcpHandler({ server: factory, eventStore: store, cluster, tasks: false, onError: () => {} });
    return { mcp, directory, forwards, lookups, store };
  }
  const B: SessionOwner = { instanceId: 'B', self: false, principal: undefined, address: 'http://b.internal/mcp' };

  it('a POST in a session another instance owns makes one lookup and one forward, and relays its answer; nothing is made here', async () => {
    const { mcp, forwards, lookups } = forwarding((id) => (id === 'held-by-b' ? B : undefined));
    const body = callTool(7, 'quick');
    const answer = await serve(mcp, 'POST', { 'mcp-session-id': 'held-by-b', 'mcp-protocol-version': VERSION }, body);
    expect(lookups).toEqual(['held-by-b']);
    expect(forwards).toEqual([{ owner: 'B', method: 'POST', body: JSON.stringify(body) }]);
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body!)).toEqual({ jsonrpc: '2.0', id: 7, result: { from: 'B' } });
    expect(mcp.sessionCount).toBe(0);
    await mcp.close();
  });

  it('a GET resume of a stream another instance writes is served from the shared store, not forwarded', async () => {
    const { mcp, forwards, store } = forwarding((id) => (id === 'held-by-b' ? B : undefined));
    // What B wrote of its stream: one notification, then the call's answer (final).
    const key = { sessionId: 'held-by-b', streamId: randomId() };
    store.memory.createStream(key);
    store.memory.append(key, 1, messageEvent(eventId(key.streamId, 1), '{"jsonrpc":"2.0","method":"notifications/message"}'), false);
    store.memory.append(key, 2, messageEvent(eventId(key.streamId, 2), '{"jsonrpc":"2.0","id":9,"result":{}}'), true);
    const headers = { 'mcp-session-id': 'held-by-b', 'mcp-protocol-version': VERSION, 'last-event-id': eventId(key.streamId, 1) };
    const answer = await serve(mcp, 'GET', headers);
    await answer.until(() => answer.ended);
    expect(forwards).toEqual([]);
    expect(store.replayAfter).toHaveBeenCalledWith('held-by-b', key.streamId, 1);
    expect(answer.messages).toEqual([{ jsonrpc: '2.0', id: 9, result: {} }]);
    await mcp.close();
  });

  it('a DELETE of a session another instance owns is forwarded once; the directory ends nothing here', async () => {
    const { mcp, forwards, directory } = forwarding((id) => (id === 'held-by-b' ? B : undefined));
    await serve(mcp, 'DELETE', { 'mcp-session-id': 'held-by-b', 'mcp-protocol-version': VERSION });
    expect(forwards).toEqual([{ owner: 'B', method: 'DELETE', body: undefined }]);
    expect(directory.calls).toEqual([]);
    await mcp.close();
  });
});

describe('the verbs in shared mode (copies)', () => {
  function shared(restore: (sessionId: string) => Promise<{ record: RestoreRecord; principal: undefined } | undefined>) {
    const directory = fakeDirectory();
    const posts: Array<{ to: string; message: ClusterMessage }> = [];
    const restores: string[] = [];
    const cluster: SessionCluster = {
      directory,
      copies: {
        restore: (sessionId) => {
          restores.push(sessionId);
          return restore(sessionId);
        },
        post: async (to, message) => void posts.push({ to, message }),
        onMessage: () => {},
      },
    };
    const gated = gatedServer();
    const mcp = createMcpHandler({ server: gated.factory, eventStore: sharedStore(), cluster, tasks: false, onError: () => {} });
    return { mcp, directory, posts, restores, gated };
  }

  it('a POST in a session not held here restores one copy from its record and runs the call here', async () => {
    const { mcp, restores } = shared(async () => ({ record: RECORD, principal: undefined }));
    const answer = await serve(mcp, 'POST', { 'mcp-session-id': 'elsewhere', 'mcp-protocol-version': VERSION }, callTool(3, 'quick'));
    await answer.until(() => answer.messages.some((m) => m.id === 3));
    expect(restores).toEqual(['elsewhere']);
    expect(answer.messages.find((m) => m.id === 3)).toMatchObject({ result: { content: [{ type: 'text', text: 'quick' }] } });
    expect(mcp.sessionCount).toBe(1);
    await mcp.close();
  });

  it("a client's answer to a question another copy asked is posted to that copy once, not served here", async () => {
    const { mcp, posts } = shared(async () => undefined);
    const sessionId = await openSession(mcp);
    const headers = { 'mcp-session-id': sessionId, 'mcp-protocol-version': VERSION };
    // The id a copy on instance `other` tagged its question with (see AnswerTags).
    const reply = { jsonrpc: '2.0', id: 'other~abcdefgh~0', result: { action: 'accept' } };
    const answer = await serve(mcp, 'POST', headers, reply);
    expect(answer.status).toBe(202);
    expect(posts).toEqual([{ to: 'other', message: { kind: 'answer', sessionId, message: reply } }]);
    await mcp.close();
  });
});

describe('the drain, against the fake port', () => {
  it('hands off an idle session at once, waits for a running call, and resolves when the call is done (long before its deadline)', async () => {
    const directory = fakeDirectory();
    const cluster: SessionCluster = { directory, owners: { lookupOwner: async () => undefined, forward: async () => {} } };
    const gated = gatedServer();
    const store = sharedStore();
    const mcp = createMcpHandler({ server: gated.factory, eventStore: store, cluster, tasks: false, onError: () => {} });
    const idle = await openSession(mcp);
    const busy = await openSession(mcp);
    const call = await serve(mcp, 'POST', { 'mcp-session-id': busy, 'mcp-protocol-version': VERSION }, callTool(5, 'wait'));
    await gated.started;

    let drained = false;
    const draining = mcp.drain({ deadlineMs: 600_000 }).then(() => (drained = true));
    // The idle session goes to the peers at once; the busy one stays while its call runs, and its
    // polling client is sent away with the retry hint (it follows the call from a peer).
    await vi.waitFor(() => expect(directory.calls).toContain(`letGo ${idle}`));
    expect(directory.calls).not.toContain(`letGo ${busy}`);
    expect(call.ended).toBe(true);
    expect(call.chunks.at(-1)).toMatch(/^retry: \d+/m);
    expect(drained).toBe(false);
    // A new session is not this instance's any more (no peer here: 503).
    const refused = await serve(mcp, 'POST', {}, INITIALIZE);
    expect(refused.status).toBe(503);

    gated.release();
    await draining;
    // The call ran to its end here: its answer is in the store, for the client's resume on a peer.
    const streamId = /^id: ?([A-Za-z0-9_-]{22})\./m.exec(call.chunks.join(''))![1]!;
    const stored = store.memory.replayAfter(busy, streamId, 0);
    expect(stored.ok && stored.complete).toBe(true);
    expect(stored.ok && stored.frames.join('')).toContain('"text":"released"');
    expect(directory.calls).toContain(`letGo ${busy}`);
    await mcp.close();
  });

  it('waits for a request still reading its session from the cluster when the drain began, and lets its call answer', async () => {
    const directory = fakeDirectory();
    let readRecord!: () => void;
    const recordRead = new Promise<void>((resolve) => (readRecord = resolve));
    let reading!: () => void;
    const readStarted = new Promise<void>((resolve) => (reading = resolve));
    const cluster: SessionCluster = {
      directory,
      copies: {
        restore: async () => {
          reading();
          await recordRead;
          return { record: RECORD, principal: undefined };
        },
        post: async () => {},
        onMessage: () => {},
      },
    };
    const gated = gatedServer();
    const mcp = createMcpHandler({ server: gated.factory, eventStore: sharedStore(), cluster, tasks: false, onError: () => {} });
    const answer = new Answer();
    const posting = mcp.handle(
      request('POST', { 'mcp-session-id': 'being-read', 'mcp-protocol-version': VERSION }, callTool(4, 'quick')),
      answer,
    );
    await readStarted;

    let drained = false;
    const draining = mcp.drain({ deadlineMs: 600_000 }).then(() => (drained = true));
    // Nothing is held here yet, and nothing runs but the request on its way: the drain waits for it
    // (given a turn of the event loop, one that did not would have resolved by now).
    await new Promise((resolve) => setImmediate(resolve));
    expect(drained).toBe(false);
    readRecord();
    await posting;
    await answer.until(() => answer.messages.some((m) => m.id === 4));
    await draining;
    expect(answer.messages.find((m) => m.id === 4)).toMatchObject({ result: { content: [{ type: 'text', text: 'quick' }] } });
    // Its copy, idle once the call answered, went back to the directory.
    expect(directory.calls).toContain('letGo being-read');
    await mcp.close();
  });
});
