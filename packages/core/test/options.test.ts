import { afterEach, describe, expect, it, vi } from 'vitest';
import { MemoryEventStore, type EventStore, type McpHandlerOptions, type SessionCluster } from '@mcp-kit/core';
import { resolveOptions } from '../src/options.js';
import type { TaskStore } from '../src/ports/task-store.js';
import { MemoryTaskStore } from '../src/tasks/memory-store.js';

const server = (() => {
  throw new Error('not called by resolveOptions');
}) as McpHandlerOptions['server'];

describe('resolveOptions: defaults', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('fills every documented default', () => {
    const o = resolveOptions({ server });
    expect(o.server).toBe(server);
    expect(o.retryMs).toBe(1000);
    expect(o.stateless).toBe(false);
    expect(o.jsonResponse).toBe(false);
    expect(o.keepAliveMs).toBe(15_000);
    expect(o.standaloneStream).toBe(true);
    expect(o.maxStreamDurationMs).toBeUndefined();
    expect(o.hibernateAfterMs).toBeUndefined();
    expect(o.sessionIdleTtlMs).toBe(30 * 60_000);
    expect(o.maxSessions).toBe(10_000);
    expect(o.maxBodyBytes).toBe(4 * 1024 * 1024);
    expect(o.maxBufferedBytes).toBe(4 * 1024 * 1024);
    expect(o.dnsRebindingProtection).toBe('auto');
    expect(o.pollPre20251125Clients).toBe(false);
    expect(o.allowedHosts).toEqual(['localhost', '127.0.0.1', '[::1]']);
    expect(o.allowedOrigins).toEqual(o.allowedHosts);
  });

  it('builds a MemoryEventStore with default limits', () => {
    const o = resolveOptions({ server });
    expect(o.eventStore).toBeInstanceOf(MemoryEventStore);
    const store = o.eventStore as MemoryEventStore;
    expect([store.maxEventsPerStream, store.maxBytes, store.maxAgeMs, store.maxTombstones]).toEqual([
      10_000,
      64 * 1024 * 1024,
      15 * 60_000,
      10_000,
    ]);
  });

  it('gives each handler its own default store', () => {
    expect(resolveOptions({ server }).eventStore).not.toBe(resolveOptions({ server }).eventStore);
  });

  it('reports errors with console.error by default', () => {
    const spy = vi.spyOn(console, 'error').mockImplementation(() => {});
    const error = new Error('boom');
    resolveOptions({ server }).onError(error);
    expect(spy).toHaveBeenCalledWith('[mcp-kit]', error);
  });
});

describe('resolveOptions: given values', () => {
  it('keeps valid values, including 0 where 0 is allowed', () => {
    const onError = () => {};
    const given = {
      retryMs: 0,
      keepAliveMs: 0,
      stateless: true,
      jsonResponse: true,
      maxStreamDurationMs: 25_000,
      sessionIdleTtlMs: 1,
      hibernateAfterMs: 0,
      maxSessions: 2,
      maxBodyBytes: 3,
      maxBufferedBytes: 4,
      dnsRebindingProtection: true,
      pollPre20251125Clients: true,
    };
    const o = resolveOptions({ server, ...given, onError });
    expect(o).toMatchObject(given);
    expect(o.onError).toBe(onError);
  });

  it('uses a given EventStore as is', () => {
    const custom: EventStore = {
      createStream: () => {},
      append: () => {},
      replayAfter: () => ({ ok: false, reason: 'unknown' }),
      deleteSession: () => {},
    };
    expect(resolveOptions({ server, eventStore: custom }).eventStore).toBe(custom);
    const memory = new MemoryEventStore();
    expect(resolveOptions({ server, eventStore: memory }).eventStore).toBe(memory);
  });

  it('builds a MemoryEventStore from limits', () => {
    const store = resolveOptions({ server, eventStore: { maxEventsPerStream: 5, maxBytes: 6, maxAgeMs: 7, maxTombstones: 8 } }).eventStore;
    expect(store).toBeInstanceOf(MemoryEventStore);
    const m = store as MemoryEventStore;
    expect([m.maxEventsPerStream, m.maxBytes, m.maxAgeMs, m.maxTombstones]).toEqual([5, 6, 7, 8]);
  });

  it('lower-cases hosts and origins and strips a trailing slash from origins', () => {
    const o = resolveOptions({
      server,
      allowedHosts: ['MCP.Example.com'],
      allowedOrigins: ['HTTPS://App.Example.com/', 'Other.Example.com'],
    });
    expect(o.allowedHosts).toEqual(['mcp.example.com']);
    expect(o.allowedOrigins).toEqual(['https://app.example.com', 'other.example.com']);
  });

  it('defaults allowedOrigins to the given allowedHosts', () => {
    const o = resolveOptions({ server, allowedHosts: ['Mcp.Internal'] });
    expect(o.allowedOrigins).toEqual(['mcp.internal']);
  });

  it('does not share the default host list between handlers', () => {
    const a = resolveOptions({ server });
    a.allowedHosts.push('evil.com');
    expect(resolveOptions({ server }).allowedHosts).not.toContain('evil.com');
  });
});

describe('resolveOptions: errors', () => {
  it('throws a TypeError that shows how to pass `server`', () => {
    const message = 'createMcpHandler: `server` must be a function that returns a new McpServer, e.g. { server: () => buildServer() }';
    expect(() => resolveOptions(undefined as unknown as McpHandlerOptions)).toThrow(TypeError);
    expect(() => resolveOptions(undefined as unknown as McpHandlerOptions)).toThrow(message);
    expect(() => resolveOptions({} as McpHandlerOptions)).toThrow(message);
    expect(() => resolveOptions({ server: {} } as unknown as McpHandlerOptions)).toThrow(TypeError);
  });

  it('lazyServers: on with hibernateAfterMs, off without, and only a boolean', () => {
    expect(resolveOptions({ server }).lazyServers).toBe(false);
    expect(resolveOptions({ server, hibernateAfterMs: 0 }).lazyServers).toBe(true);
    expect(resolveOptions({ server, hibernateAfterMs: 0, lazyServers: false }).lazyServers).toBe(false);
    expect(resolveOptions({ server, lazyServers: true }).lazyServers).toBe(true);
    expect(() => resolveOptions({ server, lazyServers: 1 as never })).toThrow(
      'createMcpHandler: lazyServers must be true or false (got 1)',
    );
  });

  it('takes the deprecated legacyPolling for pollPre20251125Clients, and says so once per process', () => {
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    expect(resolveOptions({ server, legacyPolling: true }).pollPre20251125Clients).toBe(true);
    expect(resolveOptions({ server, legacyPolling: false }).pollPre20251125Clients).toBe(false);
    // The new name wins over the old one.
    expect(resolveOptions({ server, legacyPolling: true, pollPre20251125Clients: false }).pollPre20251125Clients).toBe(false);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(warn.mock.calls[0]![0]).toMatch(/legacyPolling is deprecated: use pollPre20251125Clients/);
    expect(warn.mock.calls[0]![1]).toEqual({ type: 'DeprecationWarning', code: 'MCP_KIT_LEGACY_POLLING' });
    expect(() => resolveOptions({ server, pollPre20251125Clients: 'yes' as never })).toThrow(
      'createMcpHandler: pollPre20251125Clients must be true or false (got "yes")',
    );
    warn.mockRestore();
  });

  it('takes standaloneStream only as a boolean', () => {
    expect(resolveOptions({ server, standaloneStream: false }).standaloneStream).toBe(false);
    expect(() => resolveOptions({ server, standaloneStream: 'no' as never })).toThrow(
      'createMcpHandler: standaloneStream must be true or false (got "no")',
    );
  });

  it('rejects a clientKey that is not a function, and defaults to the socket address', () => {
    expect(() => resolveOptions({ server, clientKey: 'x-forwarded-for' as never })).toThrow(
      'createMcpHandler: clientKey must be a function (req) => string | undefined',
    );
    expect(resolveOptions({ server }).clientKey({ headers: {}, remoteAddress: '192.0.2.1' })).toBe('192.0.2.1');
  });

  it('refuses a cluster that names no mode, or two: a directory and exactly one of owners (forwarding) and copies (shared)', () => {
    const eventStore = { append() {}, replayAfter: () => ({ ok: false, reason: 'unknown' }), deleteSession() {} } as unknown as EventStore;
    const directory = { open: async () => {}, end: () => {} };
    const owners = { lookupOwner: async () => undefined, forward: async () => {} };
    const copies = { restore: async () => undefined, post: async () => {}, onMessage: () => {} };
    const resolve = (cluster: unknown) => resolveOptions({ server, eventStore, tasks: false, cluster: cluster as SessionCluster });
    expect(() => resolve({ owners })).toThrow('createMcpHandler: cluster must have a `directory`');
    expect(() => resolve({ directory })).toThrow(
      'createMcpHandler: cluster must have either `owners` (forwarding mode) or `copies` (shared mode)',
    );
    expect(() => resolve({ directory, owners, copies })).toThrow(/either `owners` \(forwarding mode\) or `copies`/);
    expect(resolve({ directory, owners }).cluster?.owners).toBe(owners);
    expect(resolve({ directory, copies }).cluster?.copies).toBe(copies);
  });

  it('refuses a cluster with an in-memory event store or task store at startup', () => {
    const cluster = {
      directory: { open: async () => {}, end: () => {} },
      owners: { lookupOwner: async () => undefined, forward: async () => {} },
    };
    // What a shared store looks like to the engine: not the in-memory default.
    const shared = new MemoryEventStore();
    const eventStore: EventStore = {
      createStream: (key) => shared.createStream(key),
      append: (key, seq, frame, final) => shared.append(key, seq, frame, final),
      replayAfter: (sessionId, streamId, afterSeq) => shared.replayAfter(sessionId, streamId, afterSeq),
      deleteSession: (sessionId) => shared.deleteSession(sessionId),
    };
    const taskStore = { ...new MemoryTaskStore(), create: () => Promise.reject(new Error('not called')) } as unknown as TaskStore;
    expect(() => resolveOptions({ server, cluster })).toThrow(/a cluster needs an eventStore every instance shares/);
    expect(() => resolveOptions({ server, cluster, eventStore: new MemoryEventStore() })).toThrow(/needs an eventStore/);
    expect(() => resolveOptions({ server, cluster, eventStore })).toThrow(/a cluster needs a taskStore every instance shares/);
    expect(() => resolveOptions({ server, cluster, eventStore, taskStore: new MemoryTaskStore() })).toThrow(/needs a taskStore/);
    expect(resolveOptions({ server, cluster, eventStore, taskStore }).cluster).toBe(cluster);
    // Without tasks there is nothing to share; a stateless handler has no cluster at all.
    expect(resolveOptions({ server, cluster, eventStore, tasks: false }).cluster).toBe(cluster);
    expect(resolveOptions({ server, cluster, eventStore, eras: ['legacy'] }).cluster).toBe(cluster);
    expect(resolveOptions({ server, cluster, stateless: true }).cluster).toBeUndefined();
  });

  const nonNegative = ['retryMs', 'keepAliveMs', 'hibernateAfterMs'] as const;
  for (const name of nonNegative) {
    for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      it(`rejects ${name} = ${bad} with a RangeError naming it`, () => {
        expect(() => resolveOptions({ server, [name]: bad })).toThrow(RangeError);
        expect(() => resolveOptions({ server, [name]: bad })).toThrow(
          `createMcpHandler: ${name} must be a non-negative integer (ms), got ${String(bad)}`,
        );
      });
    }
  }

  const positive = ['maxStreamDurationMs', 'sessionIdleTtlMs', 'maxSessions', 'maxBodyBytes', 'maxBufferedBytes'] as const;
  for (const name of positive) {
    for (const bad of [0, -5, 2.5, Number.NaN]) {
      it(`rejects ${name} = ${bad} with a RangeError naming it`, () => {
        expect(() => resolveOptions({ server, [name]: bad })).toThrow(RangeError);
        expect(() => resolveOptions({ server, [name]: bad })).toThrow(
          `createMcpHandler: ${name} must be a positive integer, got ${String(bad)}`,
        );
      });
    }
  }

  it('passes on the store limit errors', () => {
    expect(() => resolveOptions({ server, eventStore: { maxBytes: 0 } })).toThrow(
      new RangeError('MemoryEventStore: maxBytes must be a positive integer, got 0'),
    );
  });
});
