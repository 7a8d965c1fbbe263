import { randomUUID } from 'node:crypto';
import type { RedisClient } from './client.js';
import type { RestoreRecord, SessionCluster, SessionDirectory } from '@mcp-kit/core';
import { positiveInt } from '@mcp-kit/core/internal';
import { checkClient, createRedisClient, whenReady } from './client.js';
import { Owners } from './cluster/forwarding.js';
import { InstanceRegistry } from './cluster/registry.js';
import { Copies } from './cluster/shared.js';
import type { ClusterContext, ClusterStrategy, RecordChange } from './cluster/strategy.js';
import { checkEvictionPolicy } from './eviction.js';
import type { OwnerFence, StoreLink } from './fence.js';
import { Keyspace } from './keyspace.js';
import { clusterMode, type ClusterMode } from './mode.js';
import { SessionQuota } from './quota.js';
import { pipelinePerNode, type KeyedCommand } from './slots.js';

export interface RedisSessionClusterOptions {
  /** Redis to connect to. Give this or `client`. */
  url?: string;
  /** An ioredis client to use instead of `url`; the cluster does not close it. */
  client?: RedisClient;
  /**
   * How the instances share sessions. `'forward'`: each session has an owner, the instance that
   * answered its `initialize`; the requests other instances get for it are forwarded there over
   * HTTP, to its `internalUrl`. `'shared'` where instances cannot reach each other (serverless:
   * Vercel, Lambda, Cloud Run): any instance serves any request with its own copy of the session,
   * restored from the record in Redis; resumes follow the shared store; the client's answers to
   * the server's requests and its cancels reach the instance running the call through Redis
   * pub/sub. Default: `'forward'` when `internalUrl` is given; with neither, `'shared'` and a
   * deprecation warning (a later version will require one of them).
   */
  mode?: ClusterMode;
  /**
   * Where the other instances reach this instance's MCP endpoint, e.g.
   * `http://10.0.3.7:3000/mcp` (a pod IP, not the public URL: forwarded requests must reach this
   * very process). Required in forwarding mode; refused in shared mode. Checked at startup: a
   * `TypeError` names it when it is `undefined` (an unset environment variable), empty, not an
   * absolute http(s) URL, or its host is empty, `undefined` or `null`
   * (`http://${process.env.POD_IP}:3000/mcp` with `POD_IP` unset).
   */
  internalUrl?: string;
  /** Prefix of every key. Default `'mcp-kit:'`. */
  keyPrefix?: string;
  /** This instance's id. Default: a random UUID (a restarted process is a new instance). */
  instanceId?: string;
  /**
   * How often this instance tells Redis it is alive. It counts as gone `3 × heartbeatMs` after the
   * last beat; its sessions then get 404 on other instances. Default `2_000`.
   */
  heartbeatMs?: number;
  /**
   * Owner records expire this long after they were last refreshed; the heartbeat refreshes those
   * of live sessions at half this age, so only records of crashed instances expire. Default 24 h.
   */
  ownerTtlMs?: number;
  /** Connecting to an owner for a forwarded request may take this long. Default `2_000`. */
  connectTimeoutMs?: number;
  /**
   * An owner that has not started answering a forwarded request this long after it was sent (on a
   * new or a reused keep-alive connection) is checked with a request on a new connection; if that
   * gets no answer within this long either, the owner counts as unreachable (frozen, or cut off
   * by a silent partition). A `POST` then gets `502` at once (the owner may have received it, so
   * it is not run here too); a `GET` or `DELETE` waits for the owner to be declared gone and is
   * served from the restored session. An owner that answers the check is busy, not gone, and is
   * waited for. Default `3_000` (a frozen owner is given up after at most twice this).
   */
  responseTimeoutMs?: number;
  /** Relayed streams are cut past this many unread bytes (the client resumes). Default 4 MiB. */
  maxBufferedBytes?: number;
  /** Command timeout of the client created from `url`, in ms. Default `2_000`. */
  commandTimeoutMs?: number;
  /**
   * The secret with which instances sign the requests they forward or hand over to each other
   * (HMAC-SHA256 in `mcp-kit-forwarded-by`), so that a client cannot pass for an instance.
   * Default: a random one made by the first instance and kept in Redis (`<prefix>hop-secret`);
   * give your own (at least 16 characters, the same on every instance) to keep it out of Redis.
   */
  hopSecret?: string;
  /**
   * Most sessions one principal (or, without auth, one client address: the handler's `clientKey`)
   * opens across the deployment within the handler's `sessionIdleTtlMs`; past it, its `initialize`
   * gets 429 with `Retry-After`, until one of them is that old or deleted. An instance's own
   * `maxSessionsPerPrincipal` only bounds what it holds in memory (a session it lets go of lives on
   * in Redis): this bounds what one client keeps in Redis. Default: off.
   */
  maxSessionsPerPrincipal?: number;
}

/**
 * Sessions shared by several instances through Redis, for `createMcpHandler({ cluster })`, in one
 * of two modes picked once at construction (see {@link RedisSessionClusterOptions.mode}):
 * forwarding, where each session has an owner that the other instances forward its requests to
 * (`owners`, `cluster/forwarding.ts`), or shared, where any instance serves a copy restored from
 * the session's record (`copies`, `cluster/shared.ts`). It is the session directory both modes
 * share (`directory` is this object), standing on this instance's heartbeat in Redis
 * (`cluster/registry.ts`): an instance whose key is gone `3 × heartbeatMs` after its last beat
 * counts as gone.
 *
 * If the instance key was missing at a heartbeat (Redis restarted, or this instance was cut off
 * past its TTL), every record it holds is checked and written again, so service recovers by itself.
 */
export class RedisSessionCluster implements SessionCluster, SessionDirectory, StoreLink {
  readonly instanceId: string;
  /** `''` in a shared cluster. */
  readonly internalUrl: string;
  /** `mode: 'shared'`: no instance owns a session, any instance serves it (see {@link RedisSessionClusterOptions.mode}). */
  readonly shared: boolean;
  /** How often a resume followed here checks the instance that writes its stream (and touches the session). */
  readonly writerCheckMs: number;
  /** Forwarding mode: the sessions' owners, and how to reach them (`undefined` in a shared cluster). */
  readonly owners: Owners | undefined;
  /** Shared mode: copies restored from the record, and the bus between them (`undefined` in forwarding mode). */
  readonly copies: Copies | undefined;
  readonly client: RedisClient;
  private readonly keys: Keyspace;
  private readonly ownsClient: boolean;
  private readonly registry: InstanceRegistry;
  private readonly mode: ClusterStrategy;
  private letGoListener: ((sessionId: string) => void) | undefined;
  private closed = false;
  /** A `RedisEventStore` was given this cluster (see {@link StoreLink}); warned once otherwise. */
  private storeLinked = false;
  private warnedUnlinked = false;
  /** With `maxSessionsPerPrincipal`: the sessions each principal opened lately. */
  private readonly quota: SessionQuota | undefined;

  constructor(options: RedisSessionClusterOptions & { /** @internal */ ownsClient?: boolean }) {
    if (!options.client && !options.url)
      throw new TypeError('RedisSessionCluster: give `url` (e.g. process.env.REDIS_URL) or an ioredis `client`');
    if (options.client) checkClient(options.client, 'RedisSessionCluster');
    const { mode, internalUrl } = clusterMode(options, 'RedisSessionCluster');
    // Checked before anything connects.
    const perPrincipal =
      options.maxSessionsPerPrincipal === undefined
        ? undefined
        : positiveInt(options.maxSessionsPerPrincipal, 'maxSessionsPerPrincipal', 'RedisSessionCluster');
    this.shared = mode === 'shared';
    this.internalUrl = internalUrl;
    this.client =
      options.client ??
      createRedisClient(options.url as string, { commandTimeoutMs: options.commandTimeoutMs, connectionName: 'mcp-kit-cluster' });
    this.ownsClient = options.ownsClient ?? !options.client;
    this.keys = new Keyspace(options.keyPrefix ?? 'mcp-kit:');
    this.instanceId = options.instanceId ?? randomUUID();
    const heartbeatMs = positiveInt(options.heartbeatMs ?? 2_000, 'heartbeatMs', 'RedisSessionCluster');
    const ownerTtlMs = positiveInt(options.ownerTtlMs ?? 24 * 60 * 60_000, 'ownerTtlMs', 'RedisSessionCluster');
    this.writerCheckMs = Math.max(heartbeatMs, 1_000);
    this.registry = new InstanceRegistry(this.client, this.keys, this.instanceId, internalUrl, heartbeatMs, options.hopSecret, (since) =>
      this.mode.tick(since),
    );
    const context: ClusterContext = {
      client: this.client,
      keys: this.keys,
      registry: this.registry,
      lost: (sessionId) => this.letGoListener?.(sessionId),
      checkTimeoutMs: options.commandTimeoutMs ?? 2_000,
    };
    const forwarding = {
      connectTimeoutMs: options.connectTimeoutMs,
      responseTimeoutMs: positiveInt(options.responseTimeoutMs ?? 3_000, 'responseTimeoutMs', 'RedisSessionCluster'),
      maxBufferedBytes: options.maxBufferedBytes,
    };
    if (this.shared) this.mode = this.copies = new Copies(context);
    else this.mode = this.owners = new Owners(context, forwarding, ownerTtlMs);
    this.fence = this.shared
      ? undefined
      : { instanceId: this.instanceId, dataLost: (sessionId) => this.registry.dataLostSinceRecords(sessionId) };
    if (perPrincipal !== undefined) this.quota = new SessionQuota(this.client, this.keys.prefix, perPrincipal);
    this.registry.start(this.mode);
  }

  /**
   * Forwarding: what fences the writes of a `RedisEventStore` given this cluster (its `cluster`
   * option; `createRedisScaleOut` does it), see fence.ts; `undefined` in a shared cluster.
   */
  readonly fence: OwnerFence | undefined;

  /** The directory both modes share is this object. */
  get directory(): SessionDirectory {
    return this;
  }

  /** The instance named as the writer of each stream its event store makes. */
  get writerId(): string {
    return this.instanceId;
  }

  /** Called by each `RedisEventStore` given this cluster. */
  linkStore(): void {
    this.storeLinked = true;
  }

  /** Resolves once Redis answers, this instance's first heartbeat is written and Redis' eviction policy is checked. */
  async ready(timeoutMs?: number): Promise<void> {
    await whenReady(this.client, timeoutMs);
    await this.registry.heartbeat();
    await checkEvictionPolicy(this.client);
  }

  open(sessionId: string, principal: string | undefined): Promise<void> {
    if (!this.storeLinked && !this.warnedUnlinked) {
      this.warnedUnlinked = true;
      process.emitWarning(
        `RedisSessionCluster (${this.shared ? 'shared' : 'forwarding'}): no RedisEventStore was given this cluster (\`new RedisEventStore({ cluster })\`, ` +
          'or use createRedisScaleOut). ' +
          (this.shared
            ? 'Its streams name no writer, so a resume on another instance cannot tell that the instance running a call is gone.'
            : 'Its writes are not fenced: an instance that was away past its heartbeat window goes on storing events in a session a peer took over.'),
        { code: 'MCP_KIT_UNLINKED_EVENT_STORE' },
      );
    }
    return this.mode.open(sessionId, principal);
  }

  /**
   * `false` when another instance owns the session now: its record and events are not this
   * instance's to delete. Rejects when Redis did not take it; the engine calls it again then, and
   * it goes on where it stopped. In a shared cluster (called for the client's DELETE only) the
   * session ends everywhere.
   */
  end(sessionId: string): Promise<boolean> {
    return this.mode.end(sessionId);
  }

  /** Keeps what restores the session elsewhere, for `ttlMs`. */
  saveRecord(sessionId: string, record: RestoreRecord, ttlMs: number, change?: RecordChange): Promise<void> {
    return this.mode.saveRecord(sessionId, record, ttlMs, change);
  }

  /** With `maxSessionsPerPrincipal`: counts a new session toward its holder's quota (see {@link SessionQuota}). */
  async admitSession(holder: string, sessionId: string, windowMs: number): Promise<number> {
    return this.quota ? this.quota.admit(holder, sessionId, windowMs) : 0;
  }

  async releaseAdmission(holder: string, sessionId: string): Promise<void> {
    await this.quota?.release(holder, sessionId);
  }

  async keepRecords(sessionIds: string[], ttlMs: number): Promise<void> {
    this.mode.kept(sessionIds, ttlMs);
    const results = await pipelinePerNode(
      this.client,
      sessionIds.map((id): KeyedCommand => ['pexpire', this.keys.session(id), ttlMs]),
    );
    for (const [error] of results) if (error) throw error;
  }

  /** This instance let go of its copy (draining, idle): forwarding, its owner record goes and its record stays for the next instance. */
  letGo(sessionId: string): Promise<void> {
    return this.mode.letGo(sessionId);
  }

  /**
   * Nothing while the last beat is recent. After a gap (a pause, a partition, a dropped bus
   * connection), a promise that resolves once this instance checked which sessions are still its
   * own to serve; rejects when Redis cannot be asked: serving blind could make two servers of one
   * session, or serve a deleted one.
   */
  confirmHeld(): Promise<void> | undefined {
    return this.closed ? undefined : this.mode.confirmHeld();
  }

  /** Called with each session whose copy here is no longer this instance's to serve (see `SessionDirectory.onLetGo`). */
  onLetGo(listener: (sessionId: string) => void): void {
    this.letGoListener = listener;
  }

  /** Marks the session as followed from this instance for `3 × writerCheckMs`. */
  async touch(sessionId: string): Promise<void> {
    await this.client.set(this.keys.seen(sessionId), this.instanceId, 'PX', this.writerCheckMs * 3);
  }

  async activeElsewhere(sessionId: string): Promise<boolean> {
    return (await this.client.exists(this.keys.seen(sessionId))) === 1;
  }

  /** Whether an instance has beaten within its TTL (a task whose owner is gone fails); cached for half a heartbeat. */
  instanceAlive(instanceId: string): Promise<boolean> {
    return this.registry.instanceAlive(instanceId);
  }

  /** Stops the heartbeat and gives up this instance's sessions at once (other instances answer 404). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.registry.close();
    await this.mode.close();
    await this.registry.leave();
    if (this.ownsClient) await this.client.quit().catch(() => this.client.disconnect());
  }
}
