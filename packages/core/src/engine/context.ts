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
import { SessionRegistry } from '../session/registry.js';
import { InitializeAnswers } from '../session/initialize-answers.js';
import type { Session } from '../session/session.js';
import { asError } from '../util/errors.js';
import { withBriefRetries } from '../util/retry.js';
import type { ClusterPort } from './cluster-port.js';
import { Drain } from './drain.js';

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
  /** With `lazyServers`: what the factory's servers answered to `initialize`, for sessions that ask the same. */
  readonly initializeAnswers: InitializeAnswers | undefined;
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
  /** The drain and the close after it: whether they began, and what the drain waits for. */
  readonly drain = new Drain();
  /**
   * The cluster layer (`cluster/`), set by the handler when `options.cluster` is given: what the
   * verbs ask when a session is not here, or a stream is written elsewhere. `undefined` alone.
   */
  cluster: ClusterPort | undefined;
  /** What the verbs learned of a request, for its telemetry (filled only while somebody listens). */
  readonly facts = new WeakMap<CoreRequest, { era: 'legacy' | 'modern'; mcpMethod?: string; tool?: string }>();

  constructor(readonly options: ResolvedOptions) {
    this.registry = new SessionRegistry(options);
    this.initializeAnswers = options.lazyServers ? new InitializeAnswers() : undefined;
    this.modern = new ModernServers(
      options,
      (message, principal) => this.listeners.publish(message, principal),
      () => this.drain.check(),
    );
    this.instanceId = options.cluster?.directory.instanceId ?? randomId();
    this.tasks = options.tasks ? new Tasks(this) : undefined;
    if (this.tasks) this.extensions[TASKS_EXTENSION] = {};
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
    return this.options.pollPre20251125Clients || version >= FIRST_POLLING_VERSION;
  }

  /** What the store holds of a stream after `afterSeq`; `undefined` when the store failed (reported). */
  async replay(sessionId: string, streamId: string, afterSeq: number): Promise<ReplayResult | undefined> {
    const { telemetry } = this.options;
    const started = telemetry.on ? performance.now() : 0;
    let ok = false;
    try {
      const store = this.options.eventStore;
      const result = await withBriefRetries(() => store.replayAfter(sessionId, streamId, afterSeq));
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
