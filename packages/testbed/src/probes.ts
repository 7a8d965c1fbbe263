/**
 * What the suites serve beside the shared fixture: probe tools a test registers on its servers,
 * and event stores that let a test see inside (stats) or behave like a remote store
 * (asynchronous, in order).
 */
import type { EventStore, ReplayResult, StreamKey } from '@mcp-kit/core';
import { closeSSEStream, MemoryEventStore } from '@mcp-kit/core';
import { createFixtureServer } from '@mcp-kit/fixtures';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { z } from 'zod';

/** Counts servers created and closed, so a test can wait for a session to really end. */
export class ServerCounter {
  created = 0;
  closed = 0;
  private waiters: Array<{ n: number; resolve: () => void }> = [];

  /** The `server` option: the fixture, plus `extend` for probes a test adds. */
  factory(extend?: (server: McpServer, sessionId: string | undefined) => void) {
    return ({ sessionId }: { sessionId: string | undefined }) => {
      const server = createFixtureServer();
      extend?.(server, sessionId);
      this.created++;
      const previous = server.server.onclose;
      server.server.onclose = () => {
        previous?.();
        this.closed++;
        this.waiters = this.waiters.filter((w) => {
          if (this.closed < w.n) return true;
          w.resolve();
          return false;
        });
      };
      return server;
    };
  }

  /** Resolves once `n` servers in total have closed. */
  closedAtLeast(n: number): Promise<void> {
    if (this.closed >= n) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ n, resolve }));
  }
}

/** Registers `whoami`: returns the session id the tool runs in (for isolation checks). */
export function registerWhoami(server: McpServer, sessionId: string | undefined): void {
  server.registerTool('whoami', { inputSchema: {} }, async () => ({ content: [{ type: 'text', text: `session:${sessionId}` }] }));
}

/** Registers `remember {secret}`: logs the secret on the request's stream, then returns it. */
export function registerRemember(server: McpServer): void {
  server.registerTool('remember', { inputSchema: { secret: z.string() } }, async ({ secret }, extra) => {
    await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data: { secret } } });
    return { content: [{ type: 'text', text: secret }] };
  });
}

/**
 * A memory store behind an asynchronous, strictly ordered queue, the way a remote store on one
 * connection behaves: every call resolves later, and calls complete in the order they were made.
 */
export class QueuedStore implements EventStore {
  readonly inner = new MemoryEventStore();
  private chain: Promise<unknown> = Promise.resolve();
  constructor(private readonly delay: () => Promise<void> = () => new Promise((resolve) => setImmediate(resolve))) {}

  private queue<T>(op: () => T): Promise<T> {
    const run = this.chain.then(this.delay).then(op);
    this.chain = run.catch(() => {});
    return run;
  }

  createStream(key: StreamKey): Promise<void> {
    return this.queue(() => this.inner.createStream(key));
  }
  append(key: StreamKey, seq: number, frame: string, final: boolean): Promise<void> {
    return this.queue(() => this.inner.append(key, seq, frame, final));
  }
  replayAfter(sessionId: string, streamId: string, afterSeq: number): Promise<ReplayResult> {
    return this.queue(() => this.inner.replayAfter(sessionId, streamId, afterSeq));
  }
  deleteSession(sessionId: string): Promise<void> {
    return this.queue(() => this.inner.deleteSession(sessionId));
  }
  sweep(now: number): void {
    this.inner.sweep(now);
  }
  /** Resolves once every call made so far has completed. */
  drained(): Promise<void> {
    return this.chain.then(() => {});
  }
}

/**
 * A memory store whose next `replayAfter` can be held: the read happens when called (as a remote
 * store would answer from the state at that moment) but its answer is delivered only on release.
 */
export class GatedStore implements EventStore {
  readonly inner = new MemoryEventStore();
  private gate: { called: () => void; released: Promise<void> } | undefined;
  private finalWaiters: Array<() => void> = [];

  /** Holds the next replay; `called` resolves when it was read, `release()` lets the answer through. */
  holdNextReplay(): { called: Promise<void>; release: () => void } {
    let release!: () => void;
    let called!: () => void;
    const calledP = new Promise<void>((resolve) => (called = resolve));
    const released = new Promise<void>((resolve) => (release = resolve));
    this.gate = { called, released };
    return { called: calledP, release };
  }

  /** Resolves right after the next final frame (a request's last response) has been stored. */
  nextFinal(): Promise<void> {
    return new Promise((resolve) => this.finalWaiters.push(resolve));
  }

  createStream(key: StreamKey): void {
    this.inner.createStream(key);
  }

  append(key: StreamKey, seq: number, frame: string, final: boolean): void {
    this.inner.append(key, seq, frame, final);
    if (!final) return;
    const waiters = this.finalWaiters;
    this.finalWaiters = [];
    for (const w of waiters) w();
  }

  replayAfter(sessionId: string, streamId: string, afterSeq: number): ReplayResult | Promise<ReplayResult> {
    const result = this.inner.replayAfter(sessionId, streamId, afterSeq);
    const gate = this.gate;
    if (!gate) return result;
    this.gate = undefined;
    gate.called();
    return gate.released.then(() => result);
  }

  deleteSession(sessionId: string): void {
    this.inner.deleteSession(sessionId);
  }
}

/**
 * `two_phase`: `phase` log events of 4 KiB, a wait for the test's `release()`, `phase` more, then
 * the result; the test hears when each phase has been produced.
 */
export class TwoPhase {
  readonly firstProduced: Promise<void>;
  readonly secondProduced: Promise<void>;
  private firstDone!: () => void;
  private secondDone!: () => void;
  private opened!: () => void;
  private readonly gate = new Promise<void>((resolve) => (this.opened = resolve));

  constructor(readonly phase: number) {
    this.firstProduced = new Promise<void>((resolve) => (this.firstDone = resolve));
    this.secondProduced = new Promise<void>((resolve) => (this.secondDone = resolve));
  }

  release(): void {
    this.opened();
  }

  register(server: McpServer): void {
    server.registerTool('two_phase', {}, async (extra) => {
      const pad = 'x'.repeat(4096);
      for (let i = 1; i <= 2 * this.phase; i++) {
        if (i === this.phase + 1) {
          this.firstDone();
          await this.gate;
        }
        await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data: { i, pad } } });
        if (i % 32 === 0) await new Promise((resolve) => setImmediate(resolve));
      }
      this.secondDone();
      return { content: [{ type: 'text', text: 'two phases' }] };
    });
  }
}

/** `burst {count, size}`: `count` log events of `size` padding bytes each, as fast as the server takes them. */
export function registerBurst(server: McpServer, onProduced?: () => void): void {
  server.registerTool('burst', { inputSchema: { count: z.number().int(), size: z.number().int() } }, async ({ count, size }, extra) => {
    const pad = 'x'.repeat(size);
    for (let i = 1; i <= count; i++) {
      await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data: { i, pad } } });
      // Let sockets and timers run, as a real producer would between chunks of work.
      if (i % 32 === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    onProduced?.();
    return { content: [{ type: 'text', text: `burst ${count}` }] };
  });
}

/** `ticker {intervalMs}`: logs `{ tick }` every `intervalMs` until its request is aborted; reports how it stopped. */
export function registerTicker(server: McpServer, onStop: (ticks: number, reason: unknown) => void): void {
  server.registerTool('ticker', { inputSchema: { intervalMs: z.number().int() } }, async ({ intervalMs }, extra) => {
    let tick = 0;
    try {
      for (;;) {
        await extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data: { tick: ++tick } } });
        await new Promise<void>((resolve, reject) => {
          const t = setTimeout(resolve, intervalMs);
          extra.signal.addEventListener('abort', () => (clearTimeout(t), reject(extra.signal.reason)), { once: true });
        });
      }
    } catch (error) {
      onStop(tick, error);
      throw error;
    }
  });
}

/**
 * `ask_name`: lets go of its stream (a task, for a 2026 client with the extension), asks its client
 * for a name by elicitation, and answers `hello <name>`.
 */
export function registerAskName(server: McpServer): void {
  server.registerTool('ask_name', {}, async (extra) => {
    closeSSEStream(extra, 50);
    const answer = await server.server.elicitInput(
      { message: 'Your name?', requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } },
      { relatedRequestId: extra.requestId },
    );
    return { content: [{ type: 'text', text: `hello ${String(answer.content?.name)}` }] };
  });
}
