/**
 * The task store port (Tasks extension, SEP-2663). A 2026-07-28 request that a tool lets go of
 * (`closeSSEStream`) becomes a task: the client polls `tasks/get` for it, answers its questions
 * with `tasks/update` and may `tasks/cancel` it. The tool runs on one instance (the task's owner);
 * the store is where every instance reads the task's state, so a store shared by several instances
 * (`@mcp-kit/redis`) lets any of them answer for any task.
 *
 * Methods may return a promise or a plain value (the memory store answers synchronously).
 */
export interface TaskStore {
  /** Stores a new task; once it resolves, `get` finds it on every instance. */
  create(task: TaskRecord): void | Promise<void>;
  /** The task, or `undefined` when it never existed, expired or was evicted. */
  get(taskId: string): TaskRecord | undefined | Promise<TaskRecord | undefined>;
  /**
   * Applies an owner's change (status, message, input requests, result or error). A task already
   * in a terminal state is not changed (terminal states are final); `false` then.
   */
  update(taskId: string, change: TaskChange): boolean | Promise<boolean>;
  /**
   * A client answered input requests (`tasks/update`): the answered keys leave `inputRequests` at
   * once (the next `tasks/get` no longer lists them) and the answers are handed to the owner
   * through its signal listener. Keys not outstanding are ignored. `false` if the task is unknown
   * or terminal.
   */
  answer(taskId: string, responses: Record<string, unknown>): boolean | Promise<boolean>;
  /**
   * A client cancelled the task: it becomes `cancelled` now (unless already terminal) and the owner
   * is told to stop the tool. `false` if unknown; `true` (nothing changes) if already terminal.
   */
  cancel(taskId: string, reason: string): boolean | Promise<boolean>;
  /**
   * The line from the store to this instance (`instanceId`, the `owner` of the tasks it runs): what
   * clients do to its running tasks on any instance (answers, cancels), and status changes seen
   * here (`notifications/tasks`). Called once by the engine.
   */
  listen?(instanceId: string, listener: TaskSignalListener): void | Promise<void>;
  /** Optional: evicts expired tasks now; the handler calls it periodically. */
  sweep?(now: number): void;
  /** Optional: releases timers and connections. */
  close?(): void | Promise<void>;
}

export type TaskStatus = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';

export const TERMINAL_STATUSES: ReadonlySet<TaskStatus> = new Set<TaskStatus>(['completed', 'failed', 'cancelled']);

/** What a client may be asked while a task waits: an elicitation, a sampling request or a roots listing. */
export interface InputRequest {
  method: string;
  params?: Record<string, unknown>;
}

export interface TaskRecord {
  /** 128 random bits: knowing it is what lets a principal reach the task. */
  taskId: string;
  /** The principal that created it (`clientId` and `sub`); `undefined` without auth. */
  principal: string | undefined;
  /** The tool whose call it is: with `auth`, that tool's `toolScopes` are asked of each `tasks/*` request for it. */
  tool?: string;
  status: TaskStatus;
  statusMessage?: string;
  /** ms since the epoch. */
  createdAt: number;
  lastUpdatedAt: number;
  /** How long after `createdAt` the task is kept; `null` for as long as the store allows. */
  ttlMs: number | null;
  pollIntervalMs?: number;
  /** The questions outstanding while `input_required`, by the key their answers come back under. */
  inputRequests?: Record<string, InputRequest>;
  /** The tool's result once `completed` (a `CallToolResult`, tool errors included). */
  result?: Record<string, unknown>;
  /** The JSON-RPC error once `failed`. */
  error?: { code: number; message: string; data?: unknown };
  /** The instance running the tool: a task whose owner is gone fails instead of working forever. */
  owner: string;
}

export type TaskChange = Partial<Pick<TaskRecord, 'status' | 'statusMessage' | 'inputRequests' | 'result' | 'error' | 'pollIntervalMs'>>;

/** Signals from the store. */
export interface TaskSignalListener {
  /** A client answered some of a task's input requests (already removed from the record). */
  answered(taskId: string, responses: Record<string, unknown>): void;
  /** A client cancelled a task (already `cancelled` in the record). */
  cancelled(taskId: string, reason: string): void;
  /** Optional: a task's status changed (for `notifications/tasks` on listen streams). */
  changed?(task: TaskRecord): void;
  /**
   * Optional: whether a change of this task would reach anyone here (a listen stream follows it).
   * A store that hears of changes made on other instances asks before it reads the record.
   */
  follows?(taskId: string): boolean;
}
