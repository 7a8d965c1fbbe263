import type { JSONRPCMessage, RequestId } from '../ports/mcp.js';
import type { CoreResponder } from '../ports/http.js';
import { SseConnection } from '../streams/connection.js';
import { messageEvent, SSE_HEADERS } from '../streams/frames.js';
import { SERVER_INFO_KEY, SUBSCRIPTION_ID_KEY } from './envelope.js';
import type { Handshake } from './server-pool.js';

/** What a `subscriptions/listen` request asks to hear about. */
interface Filter {
  toolsListChanged?: boolean;
  promptsListChanged?: boolean;
  resourcesListChanged?: boolean;
  resourceSubscriptions?: string[];
  /** Tasks extension: `notifications/tasks` for these tasks (of the listener's own principal). */
  taskIds?: string[];
}

/** One open `subscriptions/listen` stream. */
class Listener {
  private readonly uris: Set<string>;

  private readonly tasks: Set<string>;

  constructor(
    readonly id: RequestId,
    readonly filter: Filter,
    readonly conn: SseConnection,
    private readonly serverInfo: Handshake['serverInfo'],
    readonly principal: string | undefined,
    /** Whether the listen request's token may read what a call of `tool` returns (auth/): a task's result is one. */
    private readonly mayRead: (tool: string | undefined) => boolean,
  ) {
    this.uris = new Set(filter.resourceSubscriptions ?? []);
    this.tasks = new Set(filter.taskIds ?? []);
  }

  followsTask(task: { taskId: string; principal: string | undefined; tool?: string | undefined }): boolean {
    return this.tasks.has(task.taskId) && task.principal === this.principal && this.mayRead(task.tool);
  }

  follows(taskId: string): boolean {
    return this.tasks.has(taskId);
  }

  accepts(method: string, params: { uri?: unknown } | undefined): boolean {
    switch (method) {
      case 'notifications/tools/list_changed':
        return this.filter.toolsListChanged === true;
      case 'notifications/prompts/list_changed':
        return this.filter.promptsListChanged === true;
      case 'notifications/resources/list_changed':
        return this.filter.resourcesListChanged === true;
      case 'notifications/resources/updated':
        return typeof params?.uri === 'string' && this.uris.has(params.uri);
      default:
        return false;
    }
  }

  /** Every notification on the stream names the subscription (the listen request's id). */
  send(method: string, params: Record<string, unknown> | undefined): void {
    const meta = { ...((params?._meta as Record<string, unknown> | undefined) ?? {}), [SUBSCRIPTION_ID_KEY]: this.id };
    this.conn.write(messageEvent(undefined, JSON.stringify({ jsonrpc: '2.0', method, params: { ...params, _meta: meta } })));
  }

  /** The graceful end: the listen request's result, then the end of the stream. */
  end(): void {
    const result = { resultType: 'complete', _meta: { [SUBSCRIPTION_ID_KEY]: this.id, [SERVER_INFO_KEY]: this.serverInfo } };
    this.conn.write(messageEvent(undefined, JSON.stringify({ jsonrpc: '2.0', id: this.id, result })));
    this.conn.end();
  }
}

/**
 * The `subscriptions/listen` streams of this instance: the 2026 era's replacement for the GET
 * stream. The servers' messages that belong to no request (list changes, resource updates) are
 * fanned out to the streams whose filter asks for them.
 */
export class ListenStreams {
  private readonly listeners = new Set<Listener>();

  /** The notifications a server with these capabilities can send, out of what the filter asks. */
  static honored(requested: Filter, capabilities: Record<string, unknown>, tasks: boolean): Filter {
    const caps = capabilities as {
      tools?: { listChanged?: boolean };
      prompts?: { listChanged?: boolean };
      resources?: { listChanged?: boolean; subscribe?: boolean };
    };
    const honored: Filter = {};
    if (requested.toolsListChanged && caps.tools?.listChanged) honored.toolsListChanged = true;
    if (requested.promptsListChanged && caps.prompts?.listChanged) honored.promptsListChanged = true;
    if (requested.resourcesListChanged && caps.resources?.listChanged) honored.resourcesListChanged = true;
    if (Array.isArray(requested.resourceSubscriptions) && caps.resources?.subscribe) {
      honored.resourceSubscriptions = requested.resourceSubscriptions.filter((u): u is string => typeof u === 'string');
    }
    if (tasks && Array.isArray(requested.taskIds)) honored.taskIds = requested.taskIds.filter((t): t is string => typeof t === 'string');
    return honored;
  }

  /** Whether a server with these capabilities has anything to announce on a listen stream. */
  static announces(capabilities: Record<string, unknown>): boolean {
    const c = capabilities as {
      tools?: { listChanged?: boolean };
      prompts?: { listChanged?: boolean };
      resources?: { listChanged?: boolean; subscribe?: boolean };
    };
    return Boolean(c.tools?.listChanged || c.prompts?.listChanged || c.resources?.listChanged || c.resources?.subscribe);
  }

  /** Opens a stream: the acknowledgement (what will be sent) first, then notifications as they come. */
  open(
    res: CoreResponder,
    id: RequestId,
    honored: Filter,
    handshake: Handshake,
    principal: string | undefined,
    mayRead: (tool: string | undefined) => boolean,
    live: Set<SseConnection>,
    maxBufferedBytes: number,
  ): void {
    const conn = new SseConnection(res.stream(SSE_HEADERS), maxBufferedBytes, (c) => c.end(), Date.now());
    const listener = new Listener(id, honored, conn, handshake.serverInfo, principal, mayRead);
    this.listeners.add(listener);
    live.add(conn);
    conn.onClose(() => {
      this.listeners.delete(listener);
      live.delete(conn);
    });
    listener.send('notifications/subscriptions/acknowledged', { notifications: honored });
  }

  /** A message of `principal`'s server that belongs to no request: to that principal's streams that ask for it. */
  publish(message: JSONRPCMessage, principal: string | undefined): void {
    if (!('method' in message) || this.listeners.size === 0) return;
    const params = (message as { params?: Record<string, unknown> }).params;
    for (const listener of this.listeners)
      if (listener.principal === principal && listener.accepts(message.method, params)) listener.send(message.method, params);
  }

  /** A task changed: `notifications/tasks` (what `tasks/get` would answer now) to the streams that follow it. */
  publishTask(task: { taskId: string; principal: string | undefined; tool?: string | undefined }, detailed: Record<string, unknown>): void {
    if (this.listeners.size === 0) return;
    const { resultType: _resultType, ...params } = detailed;
    for (const listener of this.listeners) if (listener.followsTask(task)) listener.send('notifications/tasks', params);
  }

  /** Whether any stream here follows the task (whoever its principal). */
  followsTask(taskId: string): boolean {
    for (const listener of this.listeners) if (listener.follows(taskId)) return true;
    return false;
  }

  /** Ends every stream gracefully (shutdown). */
  close(): void {
    for (const listener of [...this.listeners]) listener.end();
  }

  get size(): number {
    return this.listeners.size;
  }
}
