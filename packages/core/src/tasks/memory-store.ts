import { TERMINAL_STATUSES, type TaskChange, type TaskRecord, type TaskSignalListener, type TaskStore } from '../ports/task-store.js';
import { positiveInt } from '../util/numbers.js';

/** Limits of {@link MemoryTaskStore}; every limit applies at once. */
export interface MemoryTaskStoreOptions {
  /** Tasks kept at once. Default `10_000`. */
  maxTasks?: number;
  /** Size of what the tasks hold (results, questions), in UTF-16 code units of their JSON. Default `32 * 1024 * 1024`. */
  maxBytes?: number;
  /** Clock, for tests. Default `Date.now`. */
  now?: () => number;
}

/** Thrown by `create` when every slot holds a task that is still running: nothing may be evicted. */
export class TaskStoreFullError extends Error {
  constructor(limit: string) {
    super(`the task store is full (${limit}) and every task in it is still running`);
    this.name = 'TaskStoreFullError';
  }
}

/**
 * The default task store: bounded, in-process, synchronous. A task is kept until its `ttlMs` runs
 * out; past `maxTasks` or `maxBytes` the oldest finished tasks go first, and a running task is
 * never evicted (a new one is refused instead). An expired or evicted id is simply unknown: the
 * client hears "not found", never another task's state.
 */
export class MemoryTaskStore implements TaskStore {
  readonly maxTasks: number;
  readonly maxBytes: number;
  private readonly now: () => number;
  /** Insertion order is creation order: the first finished task is the oldest one. */
  private readonly tasks = new Map<string, { record: TaskRecord; bytes: number }>();
  private bytes = 0;
  private listener: TaskSignalListener | undefined;

  constructor(options: MemoryTaskStoreOptions = {}) {
    this.maxTasks = positiveInt(options.maxTasks ?? 10_000, 'maxTasks', 'MemoryTaskStore');
    this.maxBytes = positiveInt(options.maxBytes ?? 32 * 1024 * 1024, 'maxBytes', 'MemoryTaskStore');
    this.now = options.now ?? Date.now;
  }

  /** Tasks and approximate bytes held now. */
  stats(): { tasks: number; bytes: number } {
    return { tasks: this.tasks.size, bytes: this.bytes };
  }

  create(task: TaskRecord): void {
    const bytes = sizeOf(task);
    this.makeRoom(bytes);
    this.tasks.set(task.taskId, { record: { ...task }, bytes });
    this.bytes += bytes;
    this.listener?.changed?.(task);
  }

  get(taskId: string): TaskRecord | undefined {
    const entry = this.tasks.get(taskId);
    if (!entry) return undefined;
    if (this.expired(entry.record, this.now())) {
      this.drop(taskId);
      return undefined;
    }
    return { ...entry.record };
  }

  update(taskId: string, change: TaskChange): boolean {
    const entry = this.tasks.get(taskId);
    if (!entry || TERMINAL_STATUSES.has(entry.record.status)) return false;
    Object.assign(entry.record, change, { lastUpdatedAt: this.now() });
    // Questions end with the answers to them, or with the task.
    const noQuestions = change.inputRequests !== undefined && Object.keys(change.inputRequests).length === 0;
    if (noQuestions || TERMINAL_STATUSES.has(entry.record.status)) delete entry.record.inputRequests;
    this.resize(entry);
    this.listener?.changed?.({ ...entry.record });
    return true;
  }

  answer(taskId: string, responses: Record<string, unknown>): boolean {
    const entry = this.tasks.get(taskId);
    if (!entry || TERMINAL_STATUSES.has(entry.record.status)) return false;
    const outstanding = entry.record.inputRequests ?? {};
    const taken: Record<string, unknown> = {};
    for (const [key, response] of Object.entries(responses)) {
      if (!(key in outstanding)) continue;
      taken[key] = response;
      delete outstanding[key];
    }
    if (Object.keys(taken).length === 0) return true;
    if (Object.keys(outstanding).length === 0) {
      delete entry.record.inputRequests;
      entry.record.status = 'working';
    }
    entry.record.lastUpdatedAt = this.now();
    this.resize(entry);
    this.listener?.answered(taskId, taken);
    this.listener?.changed?.({ ...entry.record });
    return true;
  }

  cancel(taskId: string, reason: string): boolean {
    const entry = this.tasks.get(taskId);
    if (!entry) return false;
    if (TERMINAL_STATUSES.has(entry.record.status)) return true;
    Object.assign(entry.record, { status: 'cancelled', statusMessage: reason, lastUpdatedAt: this.now() });
    delete entry.record.inputRequests;
    this.listener?.cancelled(taskId, reason);
    this.listener?.changed?.({ ...entry.record });
    return true;
  }

  listen(_instanceId: string, listener: TaskSignalListener): void {
    this.listener = listener;
  }

  sweep(now: number = this.now()): void {
    for (const [taskId, entry] of this.tasks) if (this.expired(entry.record, now)) this.drop(taskId);
  }

  private expired(record: TaskRecord, now: number): boolean {
    return record.ttlMs !== null && now >= record.createdAt + record.ttlMs;
  }

  /** Evicts the oldest finished tasks until a new one of `bytes` fits; refuses if only running ones are left. */
  private makeRoom(bytes: number): void {
    if (this.tasks.size < this.maxTasks && this.bytes + bytes <= this.maxBytes) return;
    for (const [taskId, entry] of this.tasks) {
      if (this.tasks.size < this.maxTasks && this.bytes + bytes <= this.maxBytes) return;
      if (TERMINAL_STATUSES.has(entry.record.status)) this.drop(taskId);
    }
    if (this.tasks.size >= this.maxTasks) throw new TaskStoreFullError(`maxTasks ${this.maxTasks}`);
    if (this.bytes + bytes > this.maxBytes) throw new TaskStoreFullError(`maxBytes ${this.maxBytes}`);
  }

  private resize(entry: { record: TaskRecord; bytes: number }): void {
    const bytes = sizeOf(entry.record);
    this.bytes += bytes - entry.bytes;
    entry.bytes = bytes;
  }

  private drop(taskId: string): void {
    const entry = this.tasks.get(taskId);
    if (!entry) return;
    this.tasks.delete(taskId);
    this.bytes -= entry.bytes;
  }
}

function sizeOf(record: TaskRecord): number {
  // What varies is what the tool put there; the fixed fields are a few hundred characters.
  let bytes = 256 + (record.statusMessage?.length ?? 0);
  if (record.result) bytes += JSON.stringify(record.result).length;
  if (record.inputRequests) bytes += JSON.stringify(record.inputRequests).length;
  if (record.error) bytes += JSON.stringify(record.error).length;
  return bytes;
}
