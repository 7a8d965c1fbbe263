import { randomId } from '../events/ids.js';
import { reject, sendRejection, unavailable, type Rejection } from '../http/errors.js';
import { principalOf } from '../http/rules.js';
import type { CoreRequest, CoreResponder } from '../ports/http.js';
import type { JSONRPCRequest, MessageExtraInfo } from '../ports/mcp.js';
import { TERMINAL_STATUSES, type TaskRecord, type TaskSignalListener } from '../ports/task-store.js';
import { MemoryTaskStore, TaskStoreFullError } from '../tasks/memory-store.js';
import { RunningTask } from './running-task.js';
import { readBy, UnreadResults } from './unread-results.js';
import { asError } from '../util/errors.js';
import { triedWhile } from '../util/retry.js';
import { outlive } from '../engine/call-lifetime.js';
import { callTooLong, TASK_SERVER_SHUT_DOWN, taskInstanceLost } from '../http/call-errors.js';
import type { ResolvedOptions } from '../options.js';
import type { ListenStreams } from './listen.js';
import { TASKS_EXTENSION } from './discover.js';
import type { Envelope } from './envelope.js';
import type { Exchange } from './exchange.js';
import { sendResult } from './results.js';
import type { ModernServer } from './server-pool.js';

/** Whether the client declared the Tasks extension on this request (SEP-2663: per request, nothing carries over). */
export function declaresTasks(envelope: Envelope): boolean {
  const extensions = envelope.clientCapabilities.extensions as Record<string, unknown> | undefined;
  return typeof extensions === 'object' && extensions !== null && extensions[TASKS_EXTENSION] !== undefined;
}

/** -32021: the request needs the Tasks extension, which the client did not declare on it. */
export function tasksRequired(what: string): Rejection {
  const r = reject(
    400,
    -32021,
    `Missing required client capability: ${what} needs the ${TASKS_EXTENSION} extension, which this request does not declare`,
  );
  r.data = { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } };
  return r;
}

/**
 * What the Tasks extension needs of the engine: its `EngineContext`, named by shape because the
 * context builds the extension (the two would import each other).
 */
export interface TasksHost {
  readonly options: ResolvedOptions;
  /** How other instances name this one: a task's owner. */
  readonly instanceId: string;
  readonly listeners: ListenStreams;
  /** Told when a task ends here or its result is read: a drain waits for both. */
  readonly drain: { check(): void };
}

const NOT_FOUND = 'Task not found: the task id is unknown, expired or evicted';

/**
 * The Tasks extension (SEP-2663) for 2026-07-28 clients: turns a running `tools/call` into a task
 * (a tool's `closeSSEStream`, or a tool marked to run as one), and answers `tasks/get`,
 * `tasks/update` and `tasks/cancel` from the task store, for tasks running here or on any instance
 * that shares the store. Tasks belong to the principal that created them.
 */
export class Tasks implements TaskSignalListener {
  private readonly runningTasks = new Map<string, RunningTask>();
  /** Tasks kept alive with `waitUntil` or bounded by `maxCallDurationMs` (serverless platforms): what ends each one's keeping. */
  private readonly outliving = new Map<string, () => void>();
  /** Only with the in-process store, whose results go with the process: a drain waits until they are read. */
  private readonly unread: UnreadResults | undefined;

  /** Tasks whose tool runs here now. */
  get running(): number {
    return this.runningTasks.size;
  }

  /** Until when the client of a task that ended here is expected to read its result, from a store that ends with this process; `undefined`: none is. */
  readExpectedUntil(now: number): number | undefined {
    return this.unread?.expectedUntil(now);
  }

  constructor(private readonly ctx: TasksHost) {
    this.unread = ctx.options.taskStore instanceof MemoryTaskStore ? new UnreadResults() : undefined;
    void Promise.resolve(ctx.options.taskStore.listen?.(ctx.instanceId, this)).catch((error: unknown) =>
      ctx.options.onError(asError(error, 'task store listen failed')),
    );
  }

  // --- Signals from the store: what clients did, here or on another instance ------------------

  answered(taskId: string, responses: Record<string, unknown>): void {
    this.runningTasks.get(taskId)?.answered(responses);
  }

  cancelled(taskId: string, reason: string): void {
    this.runningTasks.get(taskId)?.stop(reason);
  }

  changed(task: TaskRecord): void {
    this.ctx.listeners.publishTask(task, detailed(task));
  }

  follows(taskId: string): boolean {
    return this.ctx.listeners.followsTask(taskId);
  }

  // --- Requests becoming tasks -----------------------------------------------------------------

  /**
   * Makes the request the server knows as `serverId` a task and answers its client with the task's
   * handle once the store has it. `false` when it cannot: the request was already answered, or the
   * store is full of running tasks (the call then stays on its stream).
   */
  start(
    exchange: Exchange,
    server: ModernServer,
    serverId: number,
    run: { request: JSONRPCRequest; extra: MessageExtraInfo; envelope: Envelope; req: CoreRequest },
    pollIntervalMs: number,
  ): boolean {
    const { options } = this.ctx;
    // Already a task (a tool that closes again), or already answered.
    if (!exchange.pending) return false;
    const now = Date.now();
    const record: TaskRecord = {
      taskId: randomId(),
      principal: principalOf(run.req.authInfo),
      ...toolOf(run.request),
      status: 'working',
      createdAt: now,
      lastUpdatedAt: now,
      ttlMs: options.taskTtlMs,
      pollIntervalMs,
      owner: this.ctx.instanceId,
    };
    let created: void | Promise<void>;
    try {
      created = options.taskStore.create(record);
    } catch (error) {
      if (!(error instanceof TaskStoreFullError)) options.onError(asError(error, 'task store create failed'));
      return false;
    }
    if (!exchange.becomeTask()) return false;
    const creation = Promise.resolve(created);
    const task = new RunningTask(record.taskId, creation, {
      store: options.taskStore,
      channel: server.channel,
      handshake: server.handshake,
      clientCapabilities: run.envelope.clientCapabilities,
      request: run.request,
      extra: run.extra,
      onError: options.onError,
      done: (taskId, outcome) => this.ended(record, outcome),
      status: (taskId, status) => this.report(taskId, status),
      storeWaitMs: options.taskTtlMs ?? Number.POSITIVE_INFINITY,
    });
    task.serverId = serverId;
    server.channel.rebind(serverId, task);
    this.runningTasks.set(record.taskId, task);
    const end = outlive(options, run.req, (limitMs) => task.expire(callTooLong(limitMs)));
    if (end) this.outliving.set(record.taskId, end);
    this.report(record.taskId, 'working');
    creation.then(
      () => exchange.answerWithTask(createTaskResult(record)),
      (error: unknown) => {
        // The client cannot poll a task the store does not have: stop the tool, and answer the
        // documented 503 with Retry-After, as for any store failure (invariant: come-back-later).
        options.onError(asError(error, 'task store create failed'));
        task.stop('the task could not be stored');
        exchange.refuse(unavailable('the task store'));
      },
    );
    return true;
  }

  // --- tasks/get, tasks/update, tasks/cancel ---------------------------------------------------

  async serve(req: CoreRequest, res: CoreResponder, message: JSONRPCRequest, envelope: Envelope): Promise<void> {
    const id = message.id;
    if (!declaresTasks(envelope)) return sendRejection(res, tasksRequired(message.method), id);
    const params = (message.params ?? {}) as { taskId?: unknown; inputResponses?: unknown };
    if (typeof params.taskId !== 'string') return sendRejection(res, reject(400, -32602, 'Invalid params: taskId must be a string'), id);
    const find = () => this.find(params.taskId as string, principalOf(req.authInfo));
    // A poll waits out a store outage (its client fails the task on an error); the others answer 503.
    const found = message.method === 'tasks/get' ? await readThroughOutage(find, res) : await find();
    if (found === undefined) return sendRejection(res, reject(200, -32602, NOT_FOUND), id);
    // Its own principal's token, but without the scopes its tool needs: 403, as for the call (auth/).
    const scoped = this.ctx.options.auth?.checkRead(req, [found.tool]);
    if (scoped && !scoped.ok) return sendRejection(res, scoped, id);
    const store = this.ctx.options.taskStore;
    // The client has seen how its task ended: a drain no longer waits for it.
    if (TERMINAL_STATUSES.has(found.status) && message.method !== 'tasks/update' && this.unread) {
      this.unread.read(found.taskId);
      this.ctx.drain.check();
    }
    if (message.method === 'tasks/get') return sendResult(res, id, detailed(found));
    if (message.method === 'tasks/cancel') {
      if (!TERMINAL_STATUSES.has(found.status)) {
        await store.cancel(found.taskId, 'cancelled by the client');
        this.report(found.taskId, 'cancelled');
      }
      return sendResult(res, id, { resultType: 'complete' });
    }
    const responses = params.inputResponses;
    if (typeof responses !== 'object' || responses === null || Array.isArray(responses)) {
      return sendRejection(res, reject(400, -32602, 'Invalid params: inputResponses must be an object'), id);
    }
    if (!TERMINAL_STATUSES.has(found.status)) await store.answer(found.taskId, responses as Record<string, unknown>);
    sendResult(res, id, { resultType: 'complete' });
  }

  private ended(record: TaskRecord, outcome: 'finished' | 'stopped'): void {
    this.runningTasks.delete(record.taskId);
    const end = this.outliving.get(record.taskId);
    if (end) {
      this.outliving.delete(record.taskId);
      end();
    }
    // A listen stream that follows the task has just carried its result in notifications/tasks.
    if (outcome === 'finished' && this.unread && !this.follows(record.taskId)) {
      const now = Date.now();
      const expiresAt = record.ttlMs === null ? undefined : record.createdAt + record.ttlMs;
      this.unread.ended(record.taskId, readBy(now, record.pollIntervalMs ?? this.ctx.options.retryMs, expiresAt), now);
    }
    this.ctx.drain.check();
  }

  private report(taskId: string, status: string): void {
    const { telemetry } = this.ctx.options;
    if (telemetry.on) telemetry.emit({ type: 'task', at: Date.now(), task: telemetry.hash(taskId), status });
  }

  /** Stops every task running here (shutdown): they fail, as their instance is going away. */
  close(): void {
    for (const task of [...this.runningTasks.values()]) {
      task.stop('the server shut down');
      void Promise.resolve(
        this.ctx.options.taskStore.update(task.taskId, {
          status: 'failed',
          error: TASK_SERVER_SHUT_DOWN,
        }),
      ).catch(() => {});
    }
  }

  /**
   * The task, if it exists and belongs to `principal`; another principal's task is as unknown as
   * one that never existed. A task still running on an instance that is gone becomes `failed`.
   */
  private async find(taskId: string, principal: string | undefined): Promise<TaskRecord | undefined> {
    const store = this.ctx.options.taskStore;
    const task = await store.get(taskId);
    if (!task || task.principal !== principal) return undefined;
    if (TERMINAL_STATUSES.has(task.status) || task.owner === this.ctx.instanceId) return task;
    const alive = await this.ctx.options.cluster?.directory.instanceAlive?.(task.owner);
    if (alive !== false) return task;
    const error = taskInstanceLost(task.owner);
    await store.update(taskId, { status: 'failed', error, statusMessage: error.message });
    this.report(taskId, 'failed');
    return (await store.get(taskId)) ?? task;
  }
}

/**
 * How long a `tasks/get` waits for a task store it cannot reach (Redis down, failing over) before
 * its 503. The Tasks extension's client fails the whole task on an error answer, so a poll is held
 * instead, well inside the clients' own request timeout (60 s in both SDKs): an outage shorter than
 * this costs the polling client nothing but a slower answer (invariant: come-back-later).
 */
const POLL_STORE_WAIT_MS = 40_000;

/** `read`, tried again once a second while the store fails, for {@link POLL_STORE_WAIT_MS} or until the client hangs up. */
async function readThroughOutage<T>(read: () => Promise<T>, res: CoreResponder): Promise<T> {
  const until = Date.now() + POLL_STORE_WAIT_MS;
  let gone = false;
  res.onClose?.(() => (gone = true));
  let value: T | undefined;
  const attempt = async () => {
    value = await read();
  };
  const last = await triedWhile(attempt, () => !gone && Date.now() < until);
  if (last !== undefined) throw last;
  return value as T;
}

/** What `tools/call` answers when it became a task (a flat `CreateTaskResult`). */
function createTaskResult(task: TaskRecord): Record<string, unknown> {
  return { resultType: 'task', ...taskFields(task) };
}

/** What `tasks/get` answers, and `notifications/tasks` carry: the task and what its status brings. */
export function detailed(task: TaskRecord): Record<string, unknown> {
  const out: Record<string, unknown> = { resultType: 'complete', ...taskFields(task) };
  if (task.status === 'input_required' && task.inputRequests) out.inputRequests = task.inputRequests;
  if (task.status === 'completed' && task.result) out.result = task.result;
  if (task.status === 'failed' && task.error) out.error = task.error;
  return out;
}

function taskFields(task: TaskRecord): Record<string, unknown> {
  const fields: Record<string, unknown> = {
    taskId: task.taskId,
    status: task.status,
    createdAt: new Date(task.createdAt).toISOString(),
    lastUpdatedAt: new Date(task.lastUpdatedAt).toISOString(),
    ttlMs: task.ttlMs,
  };
  if (task.statusMessage !== undefined) fields.statusMessage = task.statusMessage;
  if (task.pollIntervalMs !== undefined) fields.pollIntervalMs = task.pollIntervalMs;
  return fields;
}

/** The tool a `tools/call` calls, for its task's record. */
function toolOf(request: JSONRPCRequest): { tool?: string } {
  const name = (request.params as { name?: unknown } | undefined)?.name;
  return typeof name === 'string' ? { tool: name } : {};
}
