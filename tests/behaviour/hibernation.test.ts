/**
 * `hibernateAfterMs`: an idle session's McpServer is let go and a new one, brought back to where
 * the old one was, serves the session's next POST. Observed from the SDK client, over real HTTP,
 * on the in-process adapters (the test needs the factory and the servers' `onclose`).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import {
  CallToolResultSchema,
  CreateMessageRequestSchema,
  LoggingMessageNotificationSchema,
  SubscribeRequestSchema,
  ToolListChangedNotificationSchema,
  UnsubscribeRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { MemoryEventStore, type ServerFactoryContext } from '@mcp-kit/core';
import { createFixtureServer } from '@mcp-kit/fixtures';
import { inProcessAdapters, type HarnessOptions, type ServerUnderTest } from '@mcp-kit/testbed/adapters';
import { callTool } from '@mcp-kit/testbed/requests';
import { errorOf, http, openSession } from '@mcp-kit/testbed/fetch-client';

/** Resolves the next time `fire()` is called: for awaiting events instead of sleeping. */
class Signal {
  private waiters: Array<() => void> = [];
  count = 0;
  fire(): void {
    this.count++;
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }
  next(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }
  async times(n: number): Promise<void> {
    for (let i = 0; i < n; i++) await this.next();
  }
}

/**
 * The fixture plus tools that show which server instance answered and what it knows of the
 * client. Each server's `onclose` fires `closed`; every registry sweep fires `sweeps` (through the
 * event store, whose `sweep` the registry calls each round).
 */
function harness(extra: HarnessOptions = {}) {
  const contexts: ServerFactoryContext[] = [];
  const closed = new Signal();
  const sweeps = new Signal();
  /** What the client answered to `ask_later`'s request, once it did. */
  const answers: string[] = [];
  const answered = new Signal();
  /** Set by a test: what the `hold` tool awaits before it answers. */
  let hold: () => Promise<void> = async () => {};
  const store = new MemoryEventStore();
  const sweep = store.sweep.bind(store);
  store.sweep = (now?: number) => {
    sweep(now);
    sweeps.fire();
  };
  const factory = (context: ServerFactoryContext) => {
    contexts.push(context);
    const instance = contexts.length;
    const server: McpServer = createFixtureServer();
    server.registerTool('whoami', { description: 'Which server instance answers, and what it knows of the client' }, () => ({
      content: [
        {
          type: 'text',
          text: JSON.stringify({
            instance,
            client: server.server.getClientVersion()?.name,
            sampling: server.server.getClientCapabilities()?.sampling !== undefined,
          }),
        },
      ],
    }));
    server.registerTool('log_both', { description: 'Logs once at info and once at error through the level filter' }, async (ctx) => {
      await server.sendLoggingMessage({ level: 'info', data: 'info-line' }, ctx.sessionId);
      await server.sendLoggingMessage({ level: 'error', data: 'error-line' }, ctx.sessionId);
      return { content: [{ type: 'text', text: 'logged' }] };
    });
    server.registerTool('announce', { description: 'Sends tools/list_changed, which travels on the GET stream' }, () => {
      server.sendToolListChanged();
      return { content: [{ type: 'text', text: 'announced' }] };
    });
    // The request goes out unrelated to the call (on the GET stream) and is answered after the call ends.
    server.registerTool('ask_later', { description: 'Asks the client to sample, outside this call, and answers at once' }, () => {
      server.server
        .createMessage({ messages: [{ role: 'user', content: { type: 'text', text: 'later' } }], maxTokens: 10 })
        .then(
          (r) => answers.push((r.content as { text: string }).text),
          (e: Error) => answers.push(`error: ${e.message}`),
        )
        .finally(() => answered.fire());
      return { content: [{ type: 'text', text: 'will ask' }] };
    });
    // What this server was told of the client's resource subscriptions (the fixture only acknowledges them).
    const subscribed = new Set<string>();
    server.server.setRequestHandler(SubscribeRequestSchema, (request) => (subscribed.add(request.params.uri), {}));
    server.server.setRequestHandler(UnsubscribeRequestSchema, (request) => (subscribed.delete(request.params.uri), {}));
    server.registerTool('subscriptions', { description: 'The resource URIs this server was subscribed to' }, () => ({
      content: [{ type: 'text', text: JSON.stringify({ instance, uris: [...subscribed] }) }],
    }));
    server.registerTool('hold', { description: 'Answers once the test lets it' }, async () => {
      await hold();
      return { content: [{ type: 'text', text: 'held' }] };
    });
    server.server.onclose = () => closed.fire();
    return server;
  };
  const options: HarnessOptions = { hibernateAfterMs: 0, eventStore: store, server: factory, ...extra };
  return {
    options,
    contexts,
    closed,
    sweeps,
    answers,
    answered,
    /** Until the session's server is let go (now or at a coming sweep). */
    async asleep(handler: { hibernatedSessionCount: number }): Promise<void> {
      while (handler.hibernatedSessionCount === 0) await closed.next();
    },
    setHold(fn: () => Promise<void>) {
      hold = fn;
    },
  };
}

async function connect(url: string) {
  const client = new Client({ name: 'hibernation-client', version: '1.0.0' }, { capabilities: { sampling: {} } });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  const logs: string[] = [];
  const logged = new Signal();
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    logs.push(String(n.params.data));
    logged.fire();
  });
  return { client, transport, logs, logged };
}

function textOf(result: unknown): string {
  return ((result as { content: Array<{ text: string }> }).content[0] as { text: string }).text;
}

describe.each(inProcessAdapters)('hibernation: $name', (adapter) => {
  let sut: ServerUnderTest;
  let clients: Client[] = [];
  afterEach(async () => {
    for (const c of clients) await c.close();
    clients = [];
    await sut?.close();
  });

  it('lets an idle session go and restores it for the next call: same session, client info, capabilities, log level and GET stream', async () => {
    const h = harness();
    sut = await adapter.start(h.options);
    const handler = sut.inProcess!.handler;
    const { client, transport, logs, logged } = await connect(sut.url);
    clients.push(client);
    const announced = new Signal();
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => announced.fire());
    client.setRequestHandler(CreateMessageRequestSchema, async (request) => ({
      model: 'test-model',
      role: 'assistant',
      content: { type: 'text', text: `sampled: ${(request.params.messages[0]!.content as { text: string }).text}` },
    }));
    await client.setLoggingLevel('error');
    const sessionId = transport.sessionId;

    // A sweep may already have let the server go between the client's first requests: count from here.
    const whoami = async () => JSON.parse(textOf(await client.callTool({ name: 'whoami', arguments: {} }))) as { instance: number };
    const first = await whoami();
    expect(first).toEqual({ instance: h.contexts.length, client: 'hibernation-client', sampling: true });
    // The session goes idle; a sweep lets its server go (its onclose runs).
    await h.asleep(handler);
    expect(handler.hibernatedSessionCount).toBe(1);
    expect(handler.sessionCount).toBe(1);

    // The next call wakes it: a new server that knows the client as the first one did.
    expect(await whoami()).toEqual({ instance: first.instance + 1, client: 'hibernation-client', sampling: true });
    expect(h.contexts.length).toBe(first.instance + 1);
    expect(transport.sessionId).toBe(sessionId);
    expect(h.contexts[0]).toEqual({ era: 'legacy', sessionId, restoring: false });
    expect(h.contexts.slice(1).every((c) => c.restoring && c.sessionId === sessionId)).toBe(true);

    // The level the client set on an earlier server still filters on a restored one. The lines
    // have no related request, so they travel in order on the GET stream: when the error line is
    // in, the info line would be before it.
    await h.asleep(handler);
    expect(textOf(await client.callTool({ name: 'log_both', arguments: {} }))).toBe('logged');
    while (!logs.includes('error-line')) await logged.next();
    expect(logs).toEqual(['error-line']);

    // A server request (sampling) needs the restored client capabilities; it travels on the call's stream.
    await h.asleep(handler);
    const sampled = await client.callTool({ name: 'test_sampling', arguments: { prompt: 'hi' } }, CallToolResultSchema);
    expect(textOf(sampled)).toContain('sampled: hi');

    // The GET stream opened at the start stayed open through every hibernation: a restored
    // server's unprompted notification reaches the client on it.
    await h.asleep(handler);
    const before = h.contexts.length;
    const heard = announced.next();
    expect(textOf(await client.callTool({ name: 'announce', arguments: {} }))).toBe('announced');
    await heard;
    expect(h.contexts.length).toBe(before + 1);
    expect(h.contexts.slice(1).every((c) => c.restoring && c.sessionId === sessionId)).toBe(true);
    expect(sut.errors).toEqual([]);
  });

  it("keeps the client's resource subscriptions: a restored server is subscribed to what the old one was, and an unsubscribe sticks", async () => {
    const h = harness();
    sut = await adapter.start(h.options);
    const handler = sut.inProcess!.handler;
    const { client } = await connect(sut.url);
    clients.push(client);
    const subscriptions = async () =>
      JSON.parse(textOf(await client.callTool({ name: 'subscriptions', arguments: {} }))) as { instance: number; uris: string[] };
    await client.subscribeResource({ uri: 'test://watched-resource' });
    await client.subscribeResource({ uri: 'test://static-text' });
    await h.asleep(handler);
    const woken = await subscriptions();
    expect(woken.instance).toBeGreaterThan(1);
    expect(woken.uris).toEqual(['test://watched-resource', 'test://static-text']);
    await client.unsubscribeResource({ uri: 'test://watched-resource' });
    await h.asleep(handler);
    const again = await subscriptions();
    expect(again.instance).toBeGreaterThan(woken.instance);
    expect(again.uris).toEqual(['test://static-text']);
    expect(sut.errors).toEqual([]);
  });

  it('does not let a server go while a call runs or while a request to the client is unanswered', async () => {
    const h = harness();
    sut = await adapter.start(h.options);
    const { client } = await connect(sut.url);
    clients.push(client);
    // Which server and how many closes each wait saw at its start and at its end: equal if none went.
    const servers: number[] = [];
    const closes: number[] = [];
    // A request the server sends the client outside any call (on the GET stream) is answered
    // only after three sweeps: the server must still be there to take the answer.
    client.setRequestHandler(CreateMessageRequestSchema, async () => {
      servers.push(h.contexts.length);
      closes.push(h.closed.count);
      await h.sweeps.times(3);
      servers.push(h.contexts.length);
      closes.push(h.closed.count);
      return { model: 'm', role: 'assistant', content: { type: 'text', text: 'late answer' } };
    });
    expect(textOf(await client.callTool({ name: 'ask_later', arguments: {} }))).toBe('will ask');
    while (h.answers.length === 0) await h.answered.next();
    expect(h.answers).toEqual(['late answer']);
    expect(servers[0]).toBe(servers[1]);
    expect(closes[0]).toBe(closes[1]);
    // A call that runs across three sweeps keeps its server too.
    h.setHold(async () => {
      servers.push(h.contexts.length);
      closes.push(h.closed.count);
      await h.sweeps.times(3);
      servers.push(h.contexts.length);
      closes.push(h.closed.count);
    });
    expect(textOf(await client.callTool({ name: 'hold', arguments: {} }, CallToolResultSchema, { timeout: 20_000 }))).toBe('held');
    expect(servers[2]).toBe(servers[3]);
    expect(closes[2]).toBe(closes[3]);
    // Idle at last: now it goes.
    await h.asleep(sut.inProcess!.handler);
    expect(sut.inProcess!.handler.hibernatedSessionCount).toBe(1);
    expect(sut.errors).toEqual([]);
  });

  it('wakes a session once for requests that arrive together, and DELETE ends a hibernated session without waking it', async () => {
    const h = harness();
    sut = await adapter.start(h.options);
    const api = http(sut.url);
    const { headers } = await openSession(api);
    const handler = sut.inProcess!.handler;
    await h.asleep(handler);
    const before = h.contexts.length;
    const answers = await Promise.all([1, 2, 3].map((id) => api.post(callTool(10 + id, 'whoami'), headers)));
    for (const response of answers) {
      expect(response.status).toBe(200);
      expect(await response.text()).toContain(`\\"instance\\":${before + 1}`);
    }
    expect(h.contexts.length).toBe(before + 1);
    await h.asleep(handler);
    const deleted = await api.del(headers);
    expect(deleted.status).toBe(200);
    expect(h.contexts.length).toBe(before + 1);
    expect(sut.inProcess!.handler.sessionCount).toBe(0);
    expect((await errorOf(await api.post(callTool(20, 'whoami'), headers))).status).toBe(404);
  });

  it('ends the session when its server cannot be restored: 500 with a JSON-RPC error now, 404 next, and the process goes on', async () => {
    const h = harness();
    const factory = h.options.server!;
    // Only the one session's restore fails, once it is open: with `hibernateAfterMs: 0` a session
    // can be let go between its `initialize` and its `initialized` notification, and restored then.
    const broken = new Set<string>();
    h.options.server = (context) => {
      if (context.restoring && broken.has(context.sessionId!)) throw new Error('database gone');
      return factory(context);
    };
    sut = await adapter.start(h.options);
    const api = http(sut.url);
    const { sessionId, headers } = await openSession(api);
    broken.add(sessionId);
    await h.asleep(sut.inProcess!.handler);
    const failed = await errorOf(await api.post(callTool(2, 'whoami'), headers));
    expect(failed.status).toBe(500);
    expect(failed.code).toBe(-32603);
    expect(failed.message).toMatch(/could not restore/);
    expect((await errorOf(await api.post(callTool(3, 'whoami'), headers))).status).toBe(404);
    expect(sut.errors.map((e) => e.message)).toEqual([expect.stringMatching(/restoring a hibernated session failed: database gone/)]);
    // Other sessions are unaffected.
    const fresh = await openSession(api);
    expect(fresh.sessionId).toMatch(/./);
  });

  it('is off by default: an idle session keeps its server', async () => {
    const h = harness({ hibernateAfterMs: undefined, sessionIdleTtlMs: 400 });
    sut = await adapter.start(h.options);
    const api = http(sut.url);
    await openSession(api);
    // Sweeps run every 100 ms here (a quarter of the TTL); two of them see the idle session.
    await h.sweeps.times(2);
    expect(h.closed.count).toBe(0);
    expect(sut.inProcess!.handler.hibernatedSessionCount).toBe(0);
  });

  it('alone, a session let go of at maxSessions is kept as its record and restored for its next request; without hibernation it ends', async () => {
    // Hibernation on (servers rebuild from a record), but not before the test is over.
    const h = harness({ hibernateAfterMs: 60_000, maxSessions: 2 });
    sut = await adapter.start(h.options);
    const api = http(sut.url);
    const sessions = [];
    for (let i = 0; i < 5; i++) sessions.push(await openSession(api));
    const handler = sut.inProcess!.handler;
    expect(handler.sessionCount).toBe(2);
    // Each call brings its session back (and lets go of the least recently used one to make room).
    for (const [i, { headers }] of sessions.entries()) {
      const answer = await api.post(callTool(10 + i, 'whoami'), headers);
      expect(answer.status).toBe(200);
      expect(await answer.text()).toContain('\\"client\\":\\"mcp-kit-testbed\\"');
    }
    expect(handler.sessionCount).toBe(2);
    // Each was restored by a new server that was told the client's initialize: the cap holds two,
    // so the first three were out of memory when called, and each call pushed out the next one called.
    expect(h.contexts.filter((c) => c.restoring).map((c) => c.sessionId)).toEqual(sessions.map((s) => s.sessionId));
    expect(sut.errors).toEqual([]);
    await sut.close();

    // Without hibernation a server may hold state of its own: the session let go of ends.
    const alone = harness({ hibernateAfterMs: undefined, maxSessions: 2 });
    sut = await adapter.start(alone.options);
    const fresh = http(sut.url);
    const first = await openSession(fresh);
    await openSession(fresh);
    await openSession(fresh);
    expect((await errorOf(await fresh.post(callTool(2, 'whoami'), first.headers))).status).toBe(404);
  });
});
