import { MemoryEventStore, type MemoryEventStoreOptions } from './events/memory.js';
import type { EventStore } from './ports/event-store.js';
import type { TaskStore } from './ports/task-store.js';
import { MemoryTaskStore, type MemoryTaskStoreOptions } from './tasks/memory-store.js';

/** What of the handler's options picks its stores. */
export interface StoreOptions {
  cluster?: unknown;
  stateless?: boolean;
  eras?: readonly string[];
  tasks?: boolean;
  eventStore?: EventStore | MemoryEventStoreOptions;
  taskStore?: TaskStore | MemoryTaskStoreOptions;
}

/**
 * The handler's event and task stores: the ones given, or the in-memory ones with the limits given.
 * A cluster shares sessions through its stores: with the in-memory default another instance can
 * replay nothing and answer no task, and that would only show under load balancing, so the mistake
 * is refused at startup.
 */
export function resolveStores(options: StoreOptions, owner: string): { eventStore: EventStore; taskStore: TaskStore } {
  if (options.cluster && !options.stateless) {
    if (!isEventStore(options.eventStore) || options.eventStore instanceof MemoryEventStore) {
      throw new TypeError(
        `${owner}: a cluster needs an eventStore every instance shares (e.g. createRedisScaleOut(...).eventStore); ` +
          'with the in-memory one a resume on another instance finds nothing',
      );
    }
    const modern = options.eras === undefined || options.eras.includes('modern');
    if (modern && options.tasks !== false && (!isTaskStore(options.taskStore) || options.taskStore instanceof MemoryTaskStore)) {
      throw new TypeError(
        `${owner}: a cluster needs a taskStore every instance shares (e.g. createRedisScaleOut(...).taskStore), ` +
          "or tasks: false, or eras: ['legacy']; with the in-memory one a task is unknown to every other instance",
      );
    }
  }
  return {
    eventStore: isEventStore(options.eventStore) ? options.eventStore : new MemoryEventStore(options.eventStore ?? {}),
    taskStore: isTaskStore(options.taskStore) ? options.taskStore : new MemoryTaskStore(options.taskStore ?? {}),
  };
}

function isTaskStore(value: unknown): value is TaskStore {
  return typeof value === 'object' && value !== null && typeof (value as TaskStore).create === 'function';
}

function isEventStore(value: unknown): value is EventStore {
  return typeof value === 'object' && value !== null && typeof (value as EventStore).append === 'function';
}
