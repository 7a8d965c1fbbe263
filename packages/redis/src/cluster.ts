import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { CoreResponder, ForwardedRequest, SessionCluster, SessionOwner } from '@mcp-kit/core';
import { positiveInt } from '@mcp-kit/core/internal';
import { createRedisClient } from './client.js';
import { HttpForwarder } from './forward.js';

export interface RedisSessionClusterOptions {
  /** Redis to connect to. Give this or `client`. */
  url?: string;
  /** An ioredis client to use instead of `url`; the cluster does not close it. */
  client?: Redis;
  /**
   * Where the other instances reach this instance's MCP endpoint, e.g.
   * `http://10.0.3.7:3000/mcp` (a pod IP, not the public URL: forwarded requests must reach this
   * very process). Required.
   */
  internalUrl: string;
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
  /** Relayed streams are cut past this many unread bytes (the client resumes). Default 4 MiB. */
  maxBufferedBytes?: number;
  /** Command timeout of the client created from `url`, in ms. Default `2_000`. */
  commandTimeoutMs?: number;
}

interface OwnerRecord {
  /** instance id */
  i: string;
  /** internal URL */
  u: string;
  /** principal */
  p: string | null;
}

/**
 * Session ownership in Redis, for `createMcpHandler({ cluster })`: `<prefix>owner:<sessionId>`
 * names the instance that holds a session and its internal URL; `<prefix>instance:<id>` lives
 * `3 × heartbeatMs` past the instance's last heartbeat. A session whose instance key is gone has no
 * owner (404). Requests for another instance's session are relayed over HTTP to its internal URL.
 *
 * If the instance key was missing at a heartbeat (Redis restarted, or this instance was cut off
 * past its TTL), every live session's owner record is written again, so service recovers by itself.
 */
export class RedisSessionCluster implements SessionCluster {
  readonly instanceId: string;
  readonly internalUrl: string;
  readonly ownerCheckMs: number;
  readonly client: Redis;
  private readonly prefix: string;
  private readonly heartbeatMs: number;
  private readonly ownerTtlMs: number;
  private readonly ownsClient: boolean;
  private readonly forwarder: HttpForwarder;
  private readonly owned = new Map<string, { record: string; refreshedAt: number }>();
  private readonly liveness = new Map<string, { alive: boolean; at: number }>();
  private readonly timer: ReturnType<typeof setInterval>;
  private beating: Promise<void> | undefined;
  /** A claim found our instance key gone: the next beat rewrites every owner record. */
  private reclaim = false;
  private closed = false;

  constructor(options: RedisSessionClusterOptions & { /** @internal */ ownsClient?: boolean }) {
    if (!options.client && !options.url)
      throw new TypeError('RedisSessionCluster: give `url` (e.g. process.env.REDIS_URL) or an ioredis `client`');
    if (!options.internalUrl)
      throw new TypeError(
        'RedisSessionCluster: `internalUrl` is required: the URL at which the other instances reach this instance, e.g. http://10.0.3.7:3000/mcp',
      );
    this.internalUrl = new URL(options.internalUrl).href;
    this.client =
      options.client ??
      createRedisClient(options.url as string, { commandTimeoutMs: options.commandTimeoutMs, connectionName: 'mcp-kit-cluster' });
    this.ownsClient = options.ownsClient ?? !options.client;
    this.prefix = options.keyPrefix ?? 'mcp-kit:';
    this.instanceId = options.instanceId ?? randomUUID();
    this.heartbeatMs = positiveInt(options.heartbeatMs ?? 2_000, 'heartbeatMs', 'RedisSessionCluster');
    this.ownerTtlMs = positiveInt(options.ownerTtlMs ?? 24 * 60 * 60_000, 'ownerTtlMs', 'RedisSessionCluster');
    this.ownerCheckMs = Math.max(this.heartbeatMs, 1_000);
    this.forwarder = new HttpForwarder({
      instanceId: this.instanceId,
      connectTimeoutMs: options.connectTimeoutMs,
      maxBufferedBytes: options.maxBufferedBytes,
    });
    this.timer = setInterval(() => void this.heartbeat(), this.heartbeatMs);
    this.timer.unref?.();
    void this.heartbeat();
  }

  async claim(sessionId: string, principal: string | undefined): Promise<void> {
    const record = JSON.stringify({ i: this.instanceId, u: this.internalUrl, p: principal ?? null } satisfies OwnerRecord);
    const results = await this.client
      .pipeline()
      .set(this.instanceKey(this.instanceId), this.internalUrl, 'PX', this.heartbeatMs * 3, 'GET')
      .set(this.ownerKey(sessionId), record, 'PX', this.ownerTtlMs)
      .exec();
    for (const [error] of results ?? []) if (error) throw error;
    const lost = results?.[0]?.[1] === null && this.owned.size > 0;
    this.owned.set(sessionId, { record, refreshedAt: Date.now() });
    if (lost) {
      this.reclaim = true;
      void this.heartbeat();
    }
  }

  async release(sessionId: string): Promise<void> {
    if (!this.owned.delete(sessionId)) return;
    await this.client.del(this.ownerKey(sessionId));
  }

  async lookupOwner(sessionId: string): Promise<SessionOwner | undefined> {
    const raw = await this.client.get(this.ownerKey(sessionId));
    if (raw === null) return undefined;
    let record: OwnerRecord;
    try {
      record = JSON.parse(raw) as OwnerRecord;
    } catch {
      return undefined;
    }
    const owner: SessionOwner = {
      instanceId: record.i,
      self: record.i === this.instanceId,
      principal: record.p ?? undefined,
      address: record.u,
    };
    if (owner.self) return owner;
    return (await this.isAlive(record.i)) ? owner : undefined;
  }

  /** Marks the session as followed from this instance for `3 × ownerCheckMs`. */
  async touch(sessionId: string): Promise<void> {
    await this.client.set(this.seenKey(sessionId), this.instanceId, 'PX', this.ownerCheckMs * 3);
  }

  async activeElsewhere(sessionId: string): Promise<boolean> {
    return (await this.client.exists(this.seenKey(sessionId))) === 1;
  }

  forward(owner: SessionOwner, request: ForwardedRequest, responder: CoreResponder): Promise<void> {
    if (!owner.address) return Promise.reject(new Error(`no internal URL for instance ${owner.instanceId}`));
    return this.forwarder.forward(owner.address, request, responder);
  }

  /** Stops the heartbeat and gives up this instance's sessions at once (other instances answer 404). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.timer);
    this.forwarder.close();
    await this.beating;
    const keys = [this.instanceKey(this.instanceId), ...[...this.owned.keys()].map((id) => this.ownerKey(id))];
    this.owned.clear();
    await this.client.del(...keys).catch(() => {});
    if (this.ownsClient) await this.client.quit().catch(() => this.client.disconnect());
  }

  /** Whether an instance has beaten within its TTL (a task whose owner is gone fails); cached for half a heartbeat. */
  instanceAlive(instanceId: string): Promise<boolean> {
    return instanceId === this.instanceId ? Promise.resolve(!this.closed) : this.isAlive(instanceId);
  }

  /** Whether an instance has beaten within its TTL; answers are cached for half a heartbeat. */
  private async isAlive(instanceId: string): Promise<boolean> {
    const now = Date.now();
    const cached = this.liveness.get(instanceId);
    if (cached && now - cached.at < this.heartbeatMs / 2) return cached.alive;
    const alive = (await this.client.exists(this.instanceKey(instanceId))) === 1;
    if (this.liveness.size > 1_000) this.liveness.clear();
    this.liveness.set(instanceId, { alive, at: now });
    return alive;
  }

  private heartbeat(): Promise<void> {
    if (this.closed || this.beating) return this.beating ?? Promise.resolve();
    this.beating = this.beat()
      .catch(() => {}) // Redis is down: the next beat tries again; requests meanwhile get 503s.
      .finally(() => {
        this.beating = undefined;
      });
    return this.beating;
  }

  private async beat(): Promise<void> {
    const previous = await this.client.set(this.instanceKey(this.instanceId), this.internalUrl, 'PX', this.heartbeatMs * 3, 'GET');
    const now = Date.now();
    // Our key was gone, so our owner records may be too (Redis restarted): write them all again.
    const all = previous === null || this.reclaim;
    const due = [...this.owned].filter(([, o]) => all || now - o.refreshedAt > this.ownerTtlMs / 2);
    for (let i = 0; i < due.length; i += 1_000) {
      const pipeline = this.client.pipeline();
      for (const [id, o] of due.slice(i, i + 1_000)) pipeline.set(this.ownerKey(id), o.record, 'PX', this.ownerTtlMs);
      const results = await pipeline.exec();
      if ((results ?? []).some(([error]) => error)) throw new Error('refreshing owner records failed');
      for (const [, o] of due.slice(i, i + 1_000)) o.refreshedAt = now;
    }
    if (all) this.reclaim = false;
  }

  private ownerKey(sessionId: string): string {
    return `${this.prefix}owner:${sessionId}`;
  }

  private seenKey(sessionId: string): string {
    return `${this.prefix}seen:${sessionId}`;
  }

  private instanceKey(instanceId: string): string {
    return `${this.prefix}instance:${instanceId}`;
  }
}
