import type { Redis } from 'ioredis';
import type { TaskChange, TaskRecord, TaskSignalListener, TaskStore } from '@mcp-kit/core';
import { positiveInt } from '@mcp-kit/core/internal';
import { checkClient, createRedisClient, duplicateClient, LuaScript, whenReady } from './client.js';
import { checkEvictionPolicy } from './eviction.js';
import { Keyspace } from './keyspace.js';

export interface RedisTaskStoreOptions {
  /** Redis to connect to. Give this or `client`. */
  url?: string;
  /** An ioredis client to use instead of `url`; the store does not close it. */
  client?: Redis;
  /** Prefix of every key and channel. Default `'mcp-kit:'`. */
  keyPrefix?: string;
  /** How long a task with `ttlMs: null` is kept. Default 7 days. */
  maxTtlMs?: number;
  /**
   * How often the owner of running tasks checks them in Redis besides the pub/sub wake-ups, so an
   * answer or a cancel published while its subscriber connection was down still arrives. Default `2_000`.
   */
  checkEveryMs?: number;
  /** Command timeout of the client created from `url`, in ms. Default `2_000`. */
  commandTimeoutMs?: number;
}

const TERMINAL = ['completed', 'failed', 'cancelled'];

// KEYS: task, its questions. ARGV: now, inputJsonOrEmpty ('-' keeps them), field/value pairs...
// A terminal task does not change; questions are replaced when given, dropped on a terminal status.
const UPDATE = new LuaScript(
  `local status = redis.call('HGET', KEYS[1], 'status')
if not status or status == 'completed' or status == 'failed' or status == 'cancelled' then return 0 end
local i = 3
while i < #ARGV do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  i = i + 2
end
redis.call('HSET', KEYS[1], 'lastUpdatedAt', ARGV[1])
local next = redis.call('HGET', KEYS[1], 'status')
if ARGV[2] ~= '-' or next == 'completed' or next == 'failed' or next == 'cancelled' then redis.call('DEL', KEYS[2]) end
if ARGV[2] ~= '-' and next ~= 'completed' and next ~= 'failed' and next ~= 'cancelled' then
  local list = cjson.decode(ARGV[2])
  for k = 1, #list, 2 do redis.call('HSET', KEYS[2], list[k], list[k + 1]) end
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 and #list > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
end
return 1`,
  2,
);

// KEYS: task, its questions, its answers. ARGV: now, channel prefix, key/response pairs...
// Takes the answers to questions still open, hands them to the owner, wakes it.
const ANSWER = new LuaScript(
  `local status = redis.call('HGET', KEYS[1], 'status')
if not status then return -1 end
if status == 'completed' or status == 'failed' or status == 'cancelled' then return -2 end
local taken = 0
local i = 3
while i < #ARGV do
  if redis.call('HDEL', KEYS[2], ARGV[i]) == 1 then
    redis.call('RPUSH', KEYS[3], ARGV[i], ARGV[i + 1])
    taken = taken + 1
  end
  i = i + 2
end
if taken == 0 then return 0 end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[3], ttl) end
if redis.call('HLEN', KEYS[2]) == 0 then redis.call('HSET', KEYS[1], 'status', 'working') end
redis.call('HSET', KEYS[1], 'lastUpdatedAt', ARGV[1])
redis.call('PUBLISH', ARGV[2] .. redis.call('HGET', KEYS[1], 'owner'), redis.call('HGET', KEYS[1], 'taskId'))
return taken`,
  3,
);

// KEYS: task, its questions. ARGV: now, channel prefix, reason.
const CANCEL = new LuaScript(
  `local status = redis.call('HGET', KEYS[1], 'status')
if not status then return -1 end
if status == 'completed' or status == 'failed' or status == 'cancelled' then return 0 end
redis.call('HSET', KEYS[1], 'status', 'cancelled', 'statusMessage', ARGV[3], 'lastUpdatedAt', ARGV[1])
redis.call('DEL', KEYS[2])
redis.call('PUBLISH', ARGV[2] .. redis.call('HGET', KEYS[1], 'owner'), redis.call('HGET', KEYS[1], 'taskId'))
return 1`,
  2,
);

// KEYS: task, its answers. The owner takes what clients sent: the status and every answer waiting.
const TAKE = new LuaScript(
  `local status = redis.call('HGET', KEYS[1], 'status')
local answers = redis.call('LRANGE', KEYS[2], 0, -1)
redis.call('DEL', KEYS[2])
return {status or '', answers}`,
  2,
);

/**
 * A {@link TaskStore} on Redis, so `tasks/get`, `tasks/update` and `tasks/cancel` work on any
 * instance while the tool runs on one. A task is a hash `<prefix>task:<id>` (scalar fields, the
 * result and error as JSON) beside a hash of its open questions and a list of answers waiting for
 * the owner; all expire with the task's `ttlMs`. Answers and cancels change the record at once
 * (the next `tasks/get` anywhere sees them) and wake the owner on `<prefix>tasks:<instance>`;
 * the owner also checks its running tasks every `checkEveryMs`, so a lost wake-up only delays.
 */
export class RedisTaskStore implements TaskStore {
  readonly client: Redis;
  readonly keyPrefix: string;
  private readonly keys: Keyspace;
  private readonly maxTtlMs: number;
  private readonly checkEveryMs: number;
  private readonly ownsClient: boolean;
  private subscriber: Redis | undefined;
  private listener: TaskSignalListener | undefined;
  /** Tasks this instance runs and has not seen end. */
  private readonly mine = new Set<string>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private closed = false;
  /** The last change of each followed, unfinished task reported here, so a repeat is not sent twice. */
  private readonly reported = new Map<string, string>();

  constructor(options: RedisTaskStoreOptions & { /** @internal */ ownsClient?: boolean }) {
    if (!options.client && !options.url)
      throw new TypeError('RedisTaskStore: give `url` (e.g. process.env.REDIS_URL) or an ioredis `client`');
    if (options.client) checkClient(options.client, 'RedisTaskStore');
    this.client =
      options.client ??
      createRedisClient(options.url as string, { commandTimeoutMs: options.commandTimeoutMs, connectionName: 'mcp-kit-tasks' });
    this.ownsClient = options.ownsClient ?? !options.client;
    this.keyPrefix = options.keyPrefix ?? 'mcp-kit:';
    this.keys = new Keyspace(this.keyPrefix);
    this.maxTtlMs = positiveInt(options.maxTtlMs ?? 7 * 24 * 60 * 60_000, 'maxTtlMs', 'RedisTaskStore');
    this.checkEveryMs = positiveInt(options.checkEveryMs ?? 2_000, 'checkEveryMs', 'RedisTaskStore');
  }

  /**
   * Resolves once Redis answers (with `timeoutMs`, rejects after that long); until then every method
   * rejects. Warns once if Redis may evict keys (its `maxmemory-policy` is not `noeviction`).
   */
  async ready(timeoutMs?: number): Promise<void> {
    await whenReady(this.client, timeoutMs);
    await checkEvictionPolicy(this.client);
  }

  async create(task: TaskRecord): Promise<void> {
    const key = this.taskKey(task.taskId);
    const ttl = task.ttlMs ?? this.maxTtlMs;
    const fields = flatten({ ...task, principal: task.principal ?? '', ttlMs: task.ttlMs === null ? 'null' : task.ttlMs });
    const results = await this.client
      .multi()
      .hset(key, ...fields)
      .pexpire(key, ttl)
      .exec();
    for (const [error] of results ?? []) if (error) throw error;
    this.mine.add(task.taskId);
    this.announce(task.taskId);
  }

  async get(taskId: string): Promise<TaskRecord | undefined> {
    // A task an instance of the version before 0.2 runs (a rolling deploy from it): its keys had no hash tag.
    return (
      (await this.read(this.keys.task(taskId), this.keys.taskInput(taskId))) ??
      this.read(this.keys.legacy.task(taskId), this.keys.legacy.taskInput(taskId))
    );
  }

  private async read(taskKey: string, inputKey: string): Promise<TaskRecord | undefined> {
    const results = await this.client.pipeline().hgetall(taskKey).hgetall(inputKey).exec();
    const [[e1, fields], [e2, input]] = results as [[Error | null, Record<string, string>], [Error | null, Record<string, string>]];
    if (e1 || e2) throw e1 ?? e2;
    if (!fields || fields.status === undefined) return undefined;
    return parseRecord(fields, input);
  }

  async update(taskId: string, change: TaskChange): Promise<boolean> {
    const pairs: Array<string | number> = [];
    for (const [name, value] of Object.entries(change)) {
      if (name === 'inputRequests' || value === undefined) continue;
      pairs.push(name, typeof value === 'object' ? JSON.stringify(value) : value);
    }
    const input =
      change.inputRequests === undefined
        ? '-'
        : JSON.stringify(Object.entries(change.inputRequests).flatMap(([k, v]) => [k, JSON.stringify(v)]));
    const updated = (await UPDATE.run(this.client, [this.taskKey(taskId), this.inputKey(taskId), Date.now(), input, ...pairs])) === 1;
    if (updated && change.status !== undefined && TERMINAL.includes(change.status)) this.mine.delete(taskId);
    if (updated) this.announce(taskId);
    return updated;
  }

  async answer(taskId: string, responses: Record<string, unknown>): Promise<boolean> {
    const pairs = Object.entries(responses).flatMap(([k, v]) => [k, JSON.stringify(v)]);
    const answer = (keys: string[]) => ANSWER.run(this.client, [...keys, Date.now(), this.channelPrefix(), ...pairs]) as Promise<number>;
    let taken = await answer([this.taskKey(taskId), this.inputKey(taskId), this.answersKey(taskId)]);
    // No such task: maybe one an instance of the version before 0.2 runs (see `get`).
    if (taken === -1)
      taken = await answer([this.keys.legacy.task(taskId), this.keys.legacy.taskInput(taskId), this.keys.legacy.taskAnswers(taskId)]);
    if (taken > 0) this.announce(taskId);
    return taken >= 0;
  }

  async cancel(taskId: string, reason: string): Promise<boolean> {
    const cancel = (keys: string[]) => CANCEL.run(this.client, [...keys, Date.now(), this.channelPrefix(), reason]) as Promise<number>;
    let done = await cancel([this.taskKey(taskId), this.inputKey(taskId)]);
    // No such task: maybe one an instance of the version before 0.2 runs (see `get`).
    if (done === -1) done = await cancel([this.keys.legacy.task(taskId), this.keys.legacy.taskInput(taskId)]);
    if (done > 0) this.announce(taskId);
    return done >= 0;
  }

  /** Subscribes to this instance's wake-ups and starts checking its running tasks. */
  async listen(instanceId: string, listener: TaskSignalListener): Promise<void> {
    this.listener = listener;
    // ioredis resubscribes after a reconnect; what was published meanwhile arrives with the next check.
    const subscriber = duplicateClient(this.client, { connectionName: 'mcp-kit-task-signals', lazyConnect: true, autoResubscribe: true });
    subscriber.on('error', () => {});
    const changes = this.changesChannel();
    subscriber.on('message', (channel: string, taskId: string) => void (channel === changes ? this.changed(taskId) : this.take(taskId)));
    this.subscriber = subscriber;
    this.timer = setInterval(() => {
      for (const taskId of this.mine) void this.take(taskId);
    }, this.checkEveryMs);
    this.timer.unref?.();
    await subscriber.connect();
    await subscriber.subscribe(this.channelPrefix() + instanceId, changes);
  }

  /**
   * Tells every instance that a task changed (`<prefix>task-changes`), so a `subscriptions/listen`
   * stream following it anywhere gets its `notifications/tasks` on whichever instance holds it. Best effort:
   * a lost message costs one notification, never the task (`tasks/get` still answers).
   */
  private announce(taskId: string): void {
    if (this.closed) return;
    this.client.publish(this.changesChannel(), taskId).catch(() => {});
  }

  /** A task changed somewhere: read it, if a stream here follows it, and report it once per change. */
  private async changed(taskId: string): Promise<void> {
    const listener = this.listener;
    if (this.closed || !listener?.changed || !(listener.follows?.(taskId) ?? true)) return;
    let task: TaskRecord | undefined;
    try {
      task = await this.get(taskId);
    } catch {
      return;
    }
    if (!task) return;
    const seen = `${task.status} ${task.lastUpdatedAt} ${task.statusMessage ?? ''}`;
    if (this.reported.get(taskId) === seen) return;
    if (TERMINAL.includes(task.status)) this.reported.delete(taskId);
    else if (this.reported.size < 10_000) this.reported.set(taskId, seen);
    listener.changed(task);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.subscriber?.disconnect();
    if (this.ownsClient) await this.client.quit().catch(() => this.client.disconnect());
  }

  /** Hands the owner what clients did to one of its tasks. */
  private async take(taskId: string): Promise<void> {
    if (this.closed || !this.listener) return;
    let reply: [string, string[]];
    try {
      reply = (await TAKE.run(this.client, [this.taskKey(taskId), this.answersKey(taskId)])) as [string, string[]];
    } catch {
      return; // Redis is down: the next check takes it.
    }
    const [status, flat] = reply;
    if (flat.length > 0) {
      const responses: Record<string, unknown> = {};
      for (let i = 0; i + 1 < flat.length; i += 2) responses[flat[i]!] = JSON.parse(flat[i + 1]!);
      this.listener.answered(taskId, responses);
    }
    if (status === '' || TERMINAL.includes(status)) {
      this.mine.delete(taskId);
      if (status === 'cancelled') this.listener.cancelled(taskId, 'cancelled by the client');
    }
  }

  private taskKey(taskId: string): string {
    return this.keys.task(taskId);
  }

  private inputKey(taskId: string): string {
    return this.keys.taskInput(taskId);
  }

  private answersKey(taskId: string): string {
    return this.keys.taskAnswers(taskId);
  }

  private changesChannel(): string {
    return this.keys.taskChanges();
  }

  private channelPrefix(): string {
    return this.keys.taskSignals('');
  }
}

function flatten(record: Record<string, unknown>): Array<string | number> {
  const out: Array<string | number> = [];
  for (const [name, value] of Object.entries(record)) {
    if (value === undefined || name === 'inputRequests') continue;
    out.push(name, typeof value === 'object' ? JSON.stringify(value) : (value as string | number));
  }
  return out;
}

function parseRecord(f: Record<string, string>, input: Record<string, string>): TaskRecord {
  const record: TaskRecord = {
    taskId: f.taskId!,
    principal: f.principal === '' ? undefined : f.principal,
    status: f.status as TaskRecord['status'],
    createdAt: Number(f.createdAt),
    lastUpdatedAt: Number(f.lastUpdatedAt),
    ttlMs: f.ttlMs === 'null' ? null : Number(f.ttlMs),
    owner: f.owner!,
  };
  if (f.tool !== undefined) record.tool = f.tool;
  if (f.statusMessage !== undefined) record.statusMessage = f.statusMessage;
  if (f.pollIntervalMs !== undefined) record.pollIntervalMs = Number(f.pollIntervalMs);
  if (f.result !== undefined) record.result = JSON.parse(f.result);
  if (f.error !== undefined) record.error = JSON.parse(f.error);
  const keys = Object.keys(input ?? {});
  if (keys.length > 0) record.inputRequests = Object.fromEntries(keys.map((k) => [k, JSON.parse(input[k]!)]));
  return record;
}
