import type { AuthOptions } from './auth/options.js';
import { createResourceServer, type ResourceServer } from './auth/resource-server.js';
import type { MemoryEventStoreOptions } from './events/memory.js';
import { LOCAL_HOSTS } from './http/rules.js';
import type { SessionCluster } from './ports/cluster.js';
import type { EventStore } from './ports/event-store.js';
import type { HeaderMap } from './ports/http.js';
import type { TaskStore } from './ports/task-store.js';
import type { MemoryTaskStoreOptions } from './tasks/memory-store.js';
import { resolveStores } from './stores.js';
import type { ConnectableServer } from './sdk/connectable-server.js';
import { TelemetryHub } from './telemetry/hub.js';
import { nonNegativeInt, positiveInt } from './util/numbers.js';
import { deprecated } from './util/deprecation.js';

export type { ConnectableServer } from './sdk/connectable-server.js';

/**
 * The two protocol eras an endpoint can serve. `legacy`: clients that `initialize` a session
 * (protocol versions up to 2025-11-25), with SEP-1699 polling. `modern`: clients of the
 * 2026-07-28 revision, served per request from the `_meta` each request carries.
 */
export type ProtocolEra = 'legacy' | 'modern';

/** What the server factory receives. */
export interface ServerFactoryContext {
  /**
   * `legacy`: the server serves one session (a client that sent `initialize`), or one request in
   * `stateless` mode. `modern`: the server serves 2026-07-28 requests, many at once, of clients
   * that declare the same capabilities and client info (the per-request envelope); see `eras`.
   */
  era: ProtocolEra;
  /** The new session's id (`undefined` in stateless mode and in the modern era). */
  sessionId: string | undefined;
  /**
   * `true` when the server replaces one released by hibernation (see `hibernateAfterMs`): the
   * session already exists, and mcp-kit replays its initialize before any request reaches it.
   */
  restoring: boolean;
}

export interface McpHandlerOptions {
  /**
   * Builds an MCP server: an `McpServer` or low-level `Server` of SDK v1 (`@modelcontextprotocol/sdk`)
   * or SDK v2 (`@modelcontextprotocol/server`). Called for each new session, for each request in
   * `stateless` mode, and for each kind of 2026-07-28 client (see {@link ServerFactoryContext.era}).
   * Return a fresh server each time; the SDK binds one server to one transport.
   */
  server: (context: ServerFactoryContext) => ConnectableServer | Promise<ConnectableServer>;
  /**
   * The protocol eras this endpoint serves. Default both: 2025 clients get sessions and SEP-1699
   * polling, 2026-07-28 clients are served per request, on the same endpoint. `['modern']` for a
   * strict 2026 endpoint (an `initialize` gets -32022 naming 2026-07-28, GET and DELETE 405);
   * `['legacy']` answers 2026 requests with -32022 naming the 2025 versions, so clients fall back.
   */
  eras?: ProtocolEra[];
  /**
   * Serve the Tasks extension (SEP-2663) to 2026-07-28 clients that declare it: `closeSSEStream`
   * turns their `tools/call` into a task they poll with `tasks/get`, and tools marked with
   * `taskTool()` always run as one. Declared in `server/discover`. Default `true`.
   */
  tasks?: boolean;
  /**
   * Where tasks live. Default: a `MemoryTaskStore` (limits may be passed instead); several
   * instances share a store such as `@mcp-kit/redis`'s so any of them answers for any task.
   */
  taskStore?: TaskStore | MemoryTaskStoreOptions;
  /** How long a task is kept after it was created (its `ttlMs`); `null` for as long as the store allows. Default `3_600_000` (1 h). */
  taskTtlMs?: number | null;
  /**
   * The most servers kept for 2026-07-28 clients: one per distinct client kind (declared
   * capabilities) and, with `auth`, per principal (a server never serves two principals); the
   * least recently used idle one goes first. Default `16`.
   */
  maxModernServers?: number;
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
   * Where SSE frames are kept for replay. Default: a `MemoryEventStore` with its default
   * limits; pass limits to tune it, or any {@link EventStore} (e.g. `@mcp-kit/redis`).
   */
  eventStore?: EventStore | MemoryEventStoreOptions;
  /** A comment line on streams idle this long, so proxies keep them open; `0` turns it off. Default `15_000`. */
  keepAliveMs?: number;
  /**
   * Whether a `GET` without `Last-Event-ID` opens the session's standalone stream (messages of no
   * request: list changes, resource updates). `false` answers it `405`, as the spec allows; clients
   * then do without. On a serverless platform such a stream pins an instance for as long as it is
   * open, and in a shared cluster (`@mcp-kit/redis` without `internalUrl`) it carries only what the
   * copy of the session on its own instance sends. Resumes (`GET` + `Last-Event-ID`) are served
   * either way. Default `true`.
   */
  standaloneStream?: boolean;
  /**
   * Ends every SSE connection after this many ms (with the `retry` hint), before a platform limit
   * (serverless max duration, proxy read timeout) cuts it. Clients resume without loss. Requires
   * clients on protocol 2025-11-25 or later (see `pollPre20251125Clients`). Default: off.
   */
  maxStreamDurationMs?: number;
  /**
   * For serverless platforms, which freeze or end an instance once no response is in flight: called
   * at the start of each 2025-era call and each task with a promise that settles when it ends
   * (answered, cancelled, its session closed; a task in a terminal state), so a call whose stream
   * the tool closed with `closeSSEStream` keeps running. Pass the platform's: `waitUntil` from
   * `@vercel/functions`, Next's `after`, Cloudflare's `ctx.waitUntil` (per request, through
   * `toFetchHandler`'s call context, which wins over this). Default: none.
   */
  waitUntil?: (work: Promise<void>) => void;
  /**
   * Ends a 2025-era call or a task that runs longer than this many ms: its tool is cancelled and
   * its client gets a JSON-RPC error (`-32603`, `data.maxCallDurationMs`), or the task fails with
   * it. Set it below the platform's limit (e.g. Vercel's `maxDuration`), so the client hears why
   * instead of waiting for a call the platform killed. Default: off.
   */
  maxCallDurationMs?: number;
  /** A session with no request and no open stream for this long is closed. Default `30 * 60_000`. */
  sessionIdleTtlMs?: number;
  /**
   * Lets go of the `McpServer` of a session idle this long (no request in flight, no server request
   * awaiting the client, no response stream open); its next POST gets a new one from the factory,
   * told the client's `initialize`, log level and subscriptions first. It keeps its id, events and
   * any open GET stream, for a few KiB; in a `cluster` that keeps records, one with no stream open
   * costs this instance nothing (restored from its record). For servers that keep no per-session
   * state of their own and send nothing unprompted; the old one's `onclose` runs when it goes. `0`:
   * at the first sweep after it goes idle. Turns `lazyServers` on unless set. Default: off.
   */
  hibernateAfterMs?: number;
  /**
   * Builds a session's server at the first request that needs one, not at `initialize`, which gets
   * the answer a server of the factory gave to the same params (`_meta` aside) from the same
   * principal (asked again every 10 s). For servers fit for `hibernateAfterMs`. Default: on with it.
   */
  lazyServers?: boolean;
  /**
   * Most sessions this instance holds in memory. At the cap a new `initialize` lets go of the least
   * recently used idle one: with a `cluster` that keeps records only this copy goes (its next request
   * restores it anywhere); alone it ends (404) unless `hibernateAfterMs` keeps it as its record.
   * When every session is busy, `initialize` gets 503 with `Retry-After`. Default `10_000`.
   */
  maxSessions?: number;
  /**
   * Most sessions of one principal (`clientId` and `sub`), or of one client address without auth,
   * this instance holds in memory: `maxSessions` within that principal (a fetch handler sees no
   * address: only principals count there). The cluster bounds what one client opens. Default: off.
   */
  maxSessionsPerPrincipal?: number;
  /**
   * Whom `maxSessionsPerPrincipal` counts a request without auth for (authenticated ones count by
   * principal). Default: the socket's address, which behind a load balancer or proxy is the proxy's,
   * so all its clients would share one bucket; there, return the client's address from a header
   * your proxy sets and clients cannot forge past it, e.g.
   * `(req) => String(req.headers['x-forwarded-for'] ?? '').split(',')[0]?.trim() || undefined`.
   * `undefined` (or a throw, reported to `onError`) leaves the request uncounted. Also what makes
   * the cap work for a fetch handler (Next), which sees no socket.
   */
  clientKey?: (req: { headers: HeaderMap; remoteAddress: string | undefined }) => string | undefined;
  /** Largest accepted POST body, in bytes. Default `4 * 1024 * 1024`. */
  maxBodyBytes?: number;
  /**
   * A connection whose unread output exceeds this many bytes is ended with a retry hint and the
   * client resumes from the store. Default `4 * 1024 * 1024`.
   */
  maxBufferedBytes?: number;
  /**
   * While the event store is down (a Redis restart, a failover), a stream's events wait in memory,
   * in order, and are stored once it is back, so a client away polling misses none. Past this many
   * bytes waiting on one stream, its calls are stopped (their tools' signals abort) and answered
   * with an error once the store is back; later notifications on it are dropped. Default
   * `1024 * 1024`.
   */
  maxUnstoredBytes?: number;
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
   * and `closeSSEStream` leaves their stream open. `true` lets them poll as 2025-11-25 clients do
   * (SEP-1699: priming events, `retry`, streams the tool closes). Default `false`.
   */
  pollPre20251125Clients?: boolean;
  /**
   * @deprecated Use {@link pollPre20251125Clients}, which it stands for (the `legacy` era includes
   * 2025-11-25; this option is about the clients before it). Goes in the next minor release.
   */
  legacyPolling?: boolean;
  /** Called with errors that are not the client's fault (a failing store, a server factory that throws). */
  onError?: (error: Error) => void;
  /**
   * Several instances behind a load balancer without sticky sessions (e.g. `@mcp-kit/redis`):
   * requests for a session another instance owns are forwarded to it (forwarding mode), or served
   * here by a copy restored from its record (shared mode); a resume of a stream written elsewhere is
   * served from the `eventStore` all instances share. Ignored in stateless mode. Default: none.
   */
  cluster?: SessionCluster;
  /** An OAuth 2.1 resource server: every request needs a bearer token (see {@link AuthOptions}). Default: none. */
  auth?: AuthOptions;
}

const OWNER = 'createMcpHandler';

export interface ResolvedOptions {
  server: McpHandlerOptions['server'];
  eras: { legacy: boolean; modern: boolean };
  maxModernServers: number;
  tasks: boolean;
  taskStore: TaskStore;
  taskTtlMs: number | null;
  retryMs: number;
  stateless: boolean;
  jsonResponse: boolean;
  eventStore: EventStore;
  keepAliveMs: number;
  standaloneStream: boolean;
  maxStreamDurationMs: number | undefined;
  waitUntil: ((work: Promise<void>) => void) | undefined;
  maxCallDurationMs: number | undefined;
  sessionIdleTtlMs: number;
  hibernateAfterMs: number | undefined;
  lazyServers: boolean;
  maxSessions: number;
  maxSessionsPerPrincipal: number | undefined;
  clientKey: NonNullable<McpHandlerOptions['clientKey']>;
  maxBodyBytes: number;
  maxBufferedBytes: number;
  maxUnstoredBytes: number;
  dnsRebindingProtection: boolean | 'auto';
  allowedHosts: string[];
  allowedOrigins: string[];
  pollPre20251125Clients: boolean;
  onError: (error: Error) => void;
  cluster: SessionCluster | undefined;
  /** The resource server, when `auth` is set. */
  auth: ResourceServer | undefined;
  /** Where the engine's events go (see `McpHandler.observe`). */
  telemetry: TelemetryHub;
}

export function resolveOptions(options: McpHandlerOptions): ResolvedOptions {
  if (!options || typeof options.server !== 'function') {
    throw new TypeError('createMcpHandler: `server` must be a function that returns a new McpServer, e.g. { server: () => buildServer() }');
  }
  const allowedHosts = (options.allowedHosts ?? [...LOCAL_HOSTS]).map((h) => h.toLowerCase());
  const onError = options.onError ?? ((error: Error) => console.error('[mcp-kit]', error));
  const { eventStore, taskStore } = resolveStores(options, OWNER);
  return {
    server: options.server,
    eras: resolveEras(options.eras),
    maxModernServers: positiveInt(options.maxModernServers ?? 16, 'maxModernServers', OWNER),
    tasks: options.tasks ?? true,
    taskStore,
    taskTtlMs: options.taskTtlMs === null ? null : positiveInt(options.taskTtlMs ?? 3_600_000, 'taskTtlMs', OWNER),
    retryMs: nonNegativeInt(options.retryMs ?? 1000, 'retryMs', OWNER),
    stateless: options.stateless ?? false,
    jsonResponse: options.jsonResponse ?? false,
    eventStore,
    keepAliveMs: nonNegativeInt(options.keepAliveMs ?? 15_000, 'keepAliveMs', OWNER),
    standaloneStream: resolveBoolean(options.standaloneStream, true, 'standaloneStream'),
    maxStreamDurationMs:
      options.maxStreamDurationMs === undefined ? undefined : positiveInt(options.maxStreamDurationMs, 'maxStreamDurationMs', OWNER),
    waitUntil: resolveWaitUntil(options.waitUntil),
    maxCallDurationMs:
      options.maxCallDurationMs === undefined ? undefined : positiveInt(options.maxCallDurationMs, 'maxCallDurationMs', OWNER),
    sessionIdleTtlMs: positiveInt(options.sessionIdleTtlMs ?? 30 * 60_000, 'sessionIdleTtlMs', OWNER),
    hibernateAfterMs:
      options.hibernateAfterMs === undefined ? undefined : nonNegativeInt(options.hibernateAfterMs, 'hibernateAfterMs', OWNER),
    lazyServers: resolveBoolean(options.lazyServers, options.hibernateAfterMs !== undefined, 'lazyServers'),
    maxSessions: positiveInt(options.maxSessions ?? 10_000, 'maxSessions', OWNER),
    maxSessionsPerPrincipal:
      options.maxSessionsPerPrincipal === undefined
        ? undefined
        : positiveInt(options.maxSessionsPerPrincipal, 'maxSessionsPerPrincipal', OWNER),
    clientKey: resolveClientKey(options.clientKey),
    maxBodyBytes: positiveInt(options.maxBodyBytes ?? 4 * 1024 * 1024, 'maxBodyBytes', OWNER),
    maxBufferedBytes: positiveInt(options.maxBufferedBytes ?? 4 * 1024 * 1024, 'maxBufferedBytes', OWNER),
    maxUnstoredBytes: positiveInt(options.maxUnstoredBytes ?? 1024 * 1024, 'maxUnstoredBytes', OWNER),
    dnsRebindingProtection: options.dnsRebindingProtection ?? 'auto',
    allowedHosts,
    allowedOrigins: (options.allowedOrigins ?? allowedHosts).map((o) => o.toLowerCase().replace(/\/$/, '')),
    pollPre20251125Clients: resolvePollPre20251125Clients(options),
    onError,
    cluster: options.stateless ? undefined : resolveCluster(options.cluster),
    auth:
      options.auth === undefined
        ? undefined
        : createResourceServer(options.auth, { allowedHosts, clustered: options.cluster !== undefined && !options.stateless }, onError),
    telemetry: new TelemetryHub(onError),
  };
}

/** A cluster names its mode by what it gives beside its directory: exactly one of `owners` (forwarding) or `copies` (shared). */
function resolveCluster(cluster: SessionCluster | undefined): SessionCluster | undefined {
  if (cluster === undefined) return undefined;
  if (typeof cluster?.directory !== 'object' || cluster.directory === null)
    throw new TypeError(`${OWNER}: cluster must have a \`directory\` (a SessionCluster: see @mcp-kit/redis' createRedisScaleOut)`);
  if ((cluster.owners === undefined) === (cluster.copies === undefined))
    throw new TypeError(`${OWNER}: cluster must have either \`owners\` (forwarding mode) or \`copies\` (shared mode)`);
  return cluster;
}

function resolveClientKey(clientKey: McpHandlerOptions['clientKey']): ResolvedOptions['clientKey'] {
  if (clientKey === undefined) return (req) => req.remoteAddress;
  if (typeof clientKey !== 'function') throw new TypeError(`${OWNER}: clientKey must be a function (req) => string | undefined`);
  return clientKey;
}

function resolvePollPre20251125Clients(options: McpHandlerOptions): boolean {
  if (options.legacyPolling !== undefined) {
    deprecated(
      'MCP_KIT_LEGACY_POLLING',
      `${OWNER}: legacyPolling is deprecated: use pollPre20251125Clients (the same switch, for clients that negotiated a version before 2025-11-25)`,
    );
  }
  return resolveBoolean(options.pollPre20251125Clients ?? options.legacyPolling, false, 'pollPre20251125Clients');
}

function resolveBoolean(value: unknown, fallback: boolean, name: string): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw new TypeError(`${OWNER}: ${name} must be true or false (got ${JSON.stringify(value)})`);
  return value;
}

function resolveWaitUntil(waitUntil: McpHandlerOptions['waitUntil']): ResolvedOptions['waitUntil'] {
  if (waitUntil !== undefined && typeof waitUntil !== 'function') {
    throw new TypeError(`${OWNER}: waitUntil must be a function (work: Promise<void>) => void, e.g. waitUntil from @vercel/functions`);
  }
  return waitUntil;
}

function resolveEras(eras: ProtocolEra[] | undefined): ResolvedOptions['eras'] {
  if (eras === undefined) return { legacy: true, modern: true };
  if (!Array.isArray(eras) || eras.length === 0 || eras.some((e) => e !== 'legacy' && e !== 'modern')) {
    throw new TypeError(`createMcpHandler: eras must list 'legacy', 'modern' or both, got ${JSON.stringify(eras)}`);
  }
  return { legacy: eras.includes('legacy'), modern: eras.includes('modern') };
}
