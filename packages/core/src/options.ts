import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { MemoryEventStore, type MemoryEventStoreOptions } from './events/memory.js';
import { LOCAL_HOSTS } from './http/rules.js';
import type { SessionCluster } from './ports/cluster.js';
import type { EventStore } from './ports/event-store.js';
import { nonNegativeInt, positiveInt } from './util/numbers.js';

/** What the server factory receives. */
export interface ServerFactoryContext {
  /** The new session's id (`undefined` in stateless mode). */
  sessionId: string | undefined;
  /**
   * `true` when the server replaces one released by hibernation (see `hibernateAfterMs`): the
   * session already exists, and mcp-kit replays its initialize before any request reaches it.
   */
  restoring: boolean;
}

/** Anything with the SDK's `connect(transport)`: an `McpServer` or a low-level `Server`. */
export type ConnectableServer = McpServer | Server;

export interface McpHandlerOptions {
  /**
   * Builds the MCP server for a new session (or for each request in stateless mode). Return a fresh
   * `McpServer`; the SDK binds one server to one transport.
   */
  server: (context: ServerFactoryContext) => ConnectableServer | Promise<ConnectableServer>;
  /** `retry:` hint in priming events, in ms: how soon a client reconnects after a close. Default `1000`. */
  retryMs?: number;
  /**
   * No sessions: every POST gets its own server, GET and DELETE answer 405, and streams are not
   * resumable. Default `false`.
   */
  stateless?: boolean;
  /** Answer POSTs with one JSON body instead of an SSE stream (no notifications, no polling). Default `false`. */
  jsonResponse?: boolean;
  /**
   * Where SSE frames are kept for replay. Default: a {@link MemoryEventStore} with its default
   * limits; pass limits to tune it, or any {@link EventStore} (e.g. `@mcp-kit/redis`).
   */
  eventStore?: EventStore | MemoryEventStoreOptions;
  /** A comment line on streams idle this long, so proxies keep them open; `0` turns it off. Default `15_000`. */
  keepAliveMs?: number;
  /**
   * Ends every SSE connection after this many ms (with the `retry` hint), before a platform limit
   * (serverless max duration, proxy read timeout) cuts it. Clients resume without loss. Requires
   * clients on protocol 2025-11-25 or later (see `legacyPolling`). Default: off.
   */
  maxStreamDurationMs?: number;
  /** A session with no request and no open stream for this long is closed. Default `30 * 60_000`. */
  sessionIdleTtlMs?: number;
  /**
   * Lets go of the `McpServer` of a session that has been idle this long (no request in flight, no
   * server request awaiting the client, no response stream open) and builds a new one from the
   * `server` factory on the session's next POST, replaying the client's `initialize` and its last
   * `logging/setLevel` to it. A hibernated session keeps its id, its stored events and any open GET
   * stream, and costs a few KiB instead of a whole server. Only for servers that keep no
   * per-session state of their own (everything else lives outside, keyed by `sessionId`) and send
   * nothing unprompted: a hibernated session has no server to send from. The old server's
   * `onclose` runs when it is let go. `0` hibernates at the first sweep after a session goes idle.
   * Default: off.
   */
  hibernateAfterMs?: number;
  /** Most sessions at once; initialize beyond it gets 503 with `Retry-After`. Default `10_000`. */
  maxSessions?: number;
  /** Largest accepted POST body, in bytes. Default `4 * 1024 * 1024`. */
  maxBodyBytes?: number;
  /**
   * A connection whose unread output exceeds this many bytes is ended with a retry hint and the
   * client resumes from the store. Default `4 * 1024 * 1024`.
   */
  maxBufferedBytes?: number;
  /**
   * DNS-rebinding protection (Host and Origin checks). `'auto'` (default) turns it on for requests
   * that arrive on a loopback address; `true` always; `false` never.
   */
  dnsRebindingProtection?: boolean | 'auto';
  /** Host names accepted when protection is on. Default `['localhost', '127.0.0.1', '[::1]']`. */
  allowedHosts?: string[];
  /** Origins (`http://localhost:3000`) or host names accepted when protection is on. Default: `allowedHosts`. */
  allowedOrigins?: string[];
  /**
   * Clients that negotiated a protocol version before 2025-11-25 may choke on the empty `data` of
   * a priming event and may not resume a closed POST stream, so by default they get no priming event
   * and `closeSSEStream` leaves their stream open. `true` treats them like current clients.
   * Default `false`.
   */
  legacyPolling?: boolean;
  /** Called with errors that are not the client's fault (a failing store, a server factory that throws). */
  onError?: (error: Error) => void;
  /**
   * Several instances behind a load balancer without sticky sessions (e.g. `@mcp-kit/redis`):
   * requests for a session another instance owns are forwarded to it, and a `GET` +
   * `Last-Event-ID` is served here from the shared `eventStore`. Needs an `eventStore` all
   * instances share. Ignored in stateless mode. Default: none (sessions live on one instance).
   */
  cluster?: SessionCluster;
}

const OWNER = 'createMcpHandler';

export interface ResolvedOptions {
  server: McpHandlerOptions['server'];
  retryMs: number;
  stateless: boolean;
  jsonResponse: boolean;
  eventStore: EventStore;
  keepAliveMs: number;
  maxStreamDurationMs: number | undefined;
  sessionIdleTtlMs: number;
  hibernateAfterMs: number | undefined;
  maxSessions: number;
  maxBodyBytes: number;
  maxBufferedBytes: number;
  dnsRebindingProtection: boolean | 'auto';
  allowedHosts: string[];
  allowedOrigins: string[];
  legacyPolling: boolean;
  onError: (error: Error) => void;
  cluster: SessionCluster | undefined;
}

export function resolveOptions(options: McpHandlerOptions): ResolvedOptions {
  if (!options || typeof options.server !== 'function') {
    throw new TypeError('createMcpHandler: `server` must be a function that returns a new McpServer, e.g. { server: () => buildServer() }');
  }
  const allowedHosts = (options.allowedHosts ?? [...LOCAL_HOSTS]).map((h) => h.toLowerCase());
  const store = options.eventStore;
  return {
    server: options.server,
    retryMs: nonNegativeInt(options.retryMs ?? 1000, 'retryMs', OWNER),
    stateless: options.stateless ?? false,
    jsonResponse: options.jsonResponse ?? false,
    eventStore: isEventStore(store) ? store : new MemoryEventStore(store ?? {}),
    keepAliveMs: nonNegativeInt(options.keepAliveMs ?? 15_000, 'keepAliveMs', OWNER),
    maxStreamDurationMs:
      options.maxStreamDurationMs === undefined ? undefined : positiveInt(options.maxStreamDurationMs, 'maxStreamDurationMs', OWNER),
    sessionIdleTtlMs: positiveInt(options.sessionIdleTtlMs ?? 30 * 60_000, 'sessionIdleTtlMs', OWNER),
    hibernateAfterMs:
      options.hibernateAfterMs === undefined ? undefined : nonNegativeInt(options.hibernateAfterMs, 'hibernateAfterMs', OWNER),
    maxSessions: positiveInt(options.maxSessions ?? 10_000, 'maxSessions', OWNER),
    maxBodyBytes: positiveInt(options.maxBodyBytes ?? 4 * 1024 * 1024, 'maxBodyBytes', OWNER),
    maxBufferedBytes: positiveInt(options.maxBufferedBytes ?? 4 * 1024 * 1024, 'maxBufferedBytes', OWNER),
    dnsRebindingProtection: options.dnsRebindingProtection ?? 'auto',
    allowedHosts,
    allowedOrigins: (options.allowedOrigins ?? allowedHosts).map((o) => o.toLowerCase().replace(/\/$/, '')),
    legacyPolling: options.legacyPolling ?? false,
    onError: options.onError ?? ((error) => console.error('[mcp-kit]', error)),
    cluster: options.stateless ? undefined : options.cluster,
  };
}

function isEventStore(value: unknown): value is EventStore {
  return typeof value === 'object' && value !== null && typeof (value as EventStore).append === 'function';
}
