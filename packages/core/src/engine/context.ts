import { LEGACY_VERSIONS } from '../ports/mcp.js';
import { header } from '../http/rules.js';
import type { ResolvedOptions } from '../options.js';
import type { ReplayResult } from '../ports/event-store.js';
import type { CoreRequest } from '../ports/http.js';
import { randomId } from '../events/ids.js';
import { TASKS_EXTENSION } from '../modern/discover.js';
import { ListenStreams } from '../modern/listen.js';
import { Tasks } from '../modern/tasks.js';
import { ModernServers } from '../modern/server-pool.js';
import { Relays } from '../cluster/relayed-streams.js';
import { receiveShared } from '../cluster/shared-copies.js';
import { SessionRegistry } from '../session/registry.js';
import type { Session } from '../session/session.js';
import { asError } from '../util/errors.js';
import { brieflyRetried } from '../util/retry.js';

/** Version assumed when a client sends no `MCP-Protocol-Version` (what the spec prescribes). */
const DEFAULT_NEGOTIATED_VERSION = '2025-03-26';
/** The first version whose clients take a priming event and resume a POST stream (SEP-1699). */
const FIRST_POLLING_VERSION = '2025-11-25';

/**
 * What every verb of the engine works with: the resolved options, the sessions of this instance,
 * and the few decisions they all make the same way.
 */
export class EngineContext {
  readonly registry: SessionRegistry;
  /** The servers of the 2026-07-28 era, one per client kind. */
  readonly modern: ModernServers;
  /** The `subscriptions/listen` streams of the 2026-07-28 era. */
  readonly listeners = new ListenStreams();
  /** Extensions mcp-kit itself serves, declared in `server/discover` (`io.modelcontextprotocol/tasks`). */
  readonly extensions: Record<string, object> = {};
  /** The Tasks extension, unless turned off. */
  readonly tasks: Tasks | undefined;
  /** How other instances name this one (a task's owner). */
  readonly instanceId: string;
  readonly supportedVersions: readonly string[] = LEGACY_VERSIONS;
  /** Set by close(): from then on nothing new starts that the shutdown would have to wait for. */
  closing = false;
  /** Set by drain(): new work goes to other instances (see engine/drain.ts). */
  draining = false;
  /** Requests handed over while draining, to spread them over the peers. */
  handOvers = 0;
  /** Set once close() has let go of the cluster: from then on nothing can be handed over. */
  clusterClosed = false;
  /** Requests being handed over to peers now: close() lets them finish before it leaves the cluster. */
  readonly handingOver = new Set<Promise<void>>();
  /** Shared cluster: resumes waiting for a stream's writer to answer the requests the store lost (cluster/shared-copies.ts). */
  readonly lostEventsAnswered = new Map<string, Set<() => void>>();
  /** Streams relayed from other instances (ended apart by a drain, or when their peer goes silent). */
  readonly relays: Relays;
  /** What the verbs learned of a request, for its telemetry (filled only while somebody listens). */
  readonly facts = new WeakMap<CoreRequest, { era: 'legacy' | 'modern'; mcpMethod?: string; tool?: string }>();

  constructor(readonly options: ResolvedOptions) {
    this.registry = new SessionRegistry(options);
    // A peer writes a keep-alive on a stream idle keepAliveMs: twice that in silence, it is frozen or cut off.
    this.relays = new Relays(options.keepAliveMs * 2, options.retryMs);
    this.modern = new ModernServers(options, (message) => this.listeners.publish(message));
    this.instanceId = options.cluster?.instanceId ?? randomId();
    this.tasks = options.tasks ? new Tasks(this) : undefined;
    if (this.tasks) this.extensions[TASKS_EXTENSION] = {};
    // A session another instance took over while this one was away is dropped here at once, as a
    // hand-off (nothing stored is deleted): one session, one server (issue 20, item 1).
    options.cluster?.onLost?.((sessionId) => {
      const session = this.registry.get(sessionId);
      if (session) void this.registry.handOff(session, options.retryMs);
    });
    // A shared cluster: what the client sent through another instance for a call running here.
    if (options.cluster?.shared) options.cluster.onMessage?.((message) => receiveShared(this, message));
  }

  /**
   * The version a session negotiated at initialize decides priming, polling and batches; the
   * request header only stands in when the session did not learn one (stateless requests).
   */
  versionOf(req: CoreRequest, session: Session | undefined): string {
    return session?.protocolVersion ?? header(req.headers, 'mcp-protocol-version') ?? DEFAULT_NEGOTIATED_VERSION;
  }

  /** Whether a client on `version` gets priming events and resumes streams the server closes (SEP-1699). */
  polling(version: string): boolean {
    return this.options.legacyPolling || version >= FIRST_POLLING_VERSION;
  }

  /** What the store holds of a stream after `afterSeq`; `undefined` when the store failed (reported). */
  async replay(sessionId: string, streamId: string, afterSeq: number): Promise<ReplayResult | undefined> {
    const { telemetry } = this.options;
    const started = telemetry.on ? performance.now() : 0;
    let ok = false;
    try {
      const store = this.options.eventStore;
      const result = await Promise.resolve(store.replayAfter(sessionId, streamId, afterSeq)).catch(() =>
        brieflyRetried(() => store.replayAfter(sessionId, streamId, afterSeq)),
      );
      ok = true;
      return result;
    } catch (error) {
      this.options.onError(asError(error, 'event store replay failed'));
      return undefined;
    } finally {
      if (telemetry.on)
        telemetry.emit({ type: 'store', at: Date.now(), store: 'events', op: 'replayAfter', ms: performance.now() - started, ok });
    }
  }
}
