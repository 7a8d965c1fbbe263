import type { RestoreRecord } from '../ports/record.js';
import type { JSONRPCMessage, JSONRPCRequest, RequestId } from '../ports/mcp.js';

/** Ids of the requests a session sends its own server to restore it; no client id starts with NUL. */
const RESTORE_ID_PREFIX = '\u0000mcp-kit:restore:';

/** A request of {@link RECORDED_METHODS} the client sent. */
export type RecordChange = { method: string; params?: Record<string, unknown> };

/** The client's requests that change what a server keeps for its session, replayed to a new one. */
export const RECORDED_METHODS: ReadonlySet<string> = new Set(['logging/setLevel', 'resources/subscribe', 'resources/unsubscribe']);

/**
 * What a session must remember to give a new server the state its old one had: the client's
 * `initialize`, its last `logging/setLevel` and the resources it subscribed to. Hibernation keeps
 * only this (and the session's streams) when it lets a server go.
 */
export class SessionRecord {
  initialize: JSONRPCRequest | undefined;
  loggingLevel: JSONRPCRequest['params'] | undefined;
  /** `resources/subscribe` params by URI, in the order they came. */
  readonly subscriptions = new Map<string, JSONRPCRequest['params']>();
  /**
   * Called when the record changes (in a cluster, it is saved for other instances), with the
   * client's request that changed it (none for the handshake's first save); a promise when the
   * answer that completes the handshake must wait for the save (shared mode, see `CopyRules.recordFirst`).
   */
  changed: ((change?: RecordChange) => void | Promise<void>) | undefined;

  /** Remembers what a request from the client changes for the rest of the session. */
  observe(request: JSONRPCRequest): void {
    if (request.method === 'initialize') this.initialize ??= request;
    else if (this.remember(request)) void this.changed?.({ method: request.method, params: request.params });
  }

  /** Takes a request of {@link RECORDED_METHODS} into the record (`false` for any other), without saving it. */
  remember(request: { method: string; params?: JSONRPCRequest['params'] }): boolean {
    const uri = (request.params as { uri?: unknown } | undefined)?.uri;
    switch (request.method) {
      case 'logging/setLevel':
        this.loggingLevel = request.params;
        return true;
      case 'resources/subscribe':
        if (typeof uri !== 'string') return false;
        this.subscriptions.set(uri, request.params);
        return true;
      case 'resources/unsubscribe':
        return typeof uri === 'string' && this.subscriptions.delete(uri);
      default:
        return false;
    }
  }
}

/**
 * Brings a new server (already connected to the session's transport) to where the released one
 * was: it replays the client's initialize, `notifications/initialized` and the last
 * `logging/setLevel`, and swallows the server's answers to them.
 */
export class Restorer {
  /** Answers due from the server to the restore requests. */
  private readonly due = new Map<RequestId, (error: string | undefined) => void>();
  private seq = 0;
  /** Why the session ended, once it did: every restore request fails with it from then on. */
  private aborted: string | undefined;

  constructor(private readonly toServer: (message: JSONRPCMessage) => void) {}

  /** Whether answers to restore requests are due (checked before {@link consume} on every send). */
  get pending(): boolean {
    return this.due.size > 0;
  }

  /** Tells the server what the client asked through another instance (its answer is swallowed). */
  async tell(method: string, params: JSONRPCRequest['params']): Promise<void> {
    await this.request(method, params);
  }

  async replay(record: SessionRecord): Promise<void> {
    const failed = await this.request('initialize', record.initialize!.params);
    if (failed !== undefined) throw new Error(`the new server refused the session's initialize: ${failed}`);
    this.toServer({ jsonrpc: '2.0', method: 'notifications/initialized' });
    // A server without the logging capability answers "method not found": then there is no level to restore.
    if (record.loggingLevel !== undefined) await this.request('logging/setLevel', record.loggingLevel);
    // Likewise a server that takes no subscriptions refuses them: there are none to restore then.
    for (const params of record.subscriptions.values()) await this.request('resources/subscribe', params);
  }

  /** Takes the server's answer to a restore request; `false` when `message` answers something else. */
  consume(message: JSONRPCMessage): boolean {
    const id = (message as { id?: RequestId }).id;
    const settle = id === undefined ? undefined : this.due.get(id);
    if (!settle) return false;
    this.due.delete(id!);
    const error = (message as { error?: { message?: unknown } }).error;
    settle(error === undefined ? undefined : String(error.message));
    return true;
  }

  /** The session ended while restoring: every replayed request fails, and any sent later (its server answers nobody now). */
  abort(reason: string): void {
    this.aborted = reason;
    for (const settle of this.due.values()) settle(reason);
    this.due.clear();
  }

  private request(method: string, params: JSONRPCRequest['params']): Promise<string | undefined> {
    if (this.aborted !== undefined) return Promise.resolve(this.aborted);
    const id = `${RESTORE_ID_PREFIX}${++this.seq}`;
    return new Promise((resolve) => {
      this.due.set(id, resolve);
      this.toServer({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) });
    });
  }
}

/**
 * What of a session its record is read from and written to: a `Session`, named by shape so that
 * the record (which the session's server holds) does not import the session back.
 */
interface RecordedSession {
  readonly server: { readonly record: SessionRecord; hibernated: boolean };
  protocolVersion: string | undefined;
  restored: boolean;
}

/** What restores a session elsewhere (see `SessionDirectory.saveRecord`), once its handshake is done. */
export function restoreRecordOf(session: RecordedSession): RestoreRecord | undefined {
  const { initialize, loggingLevel } = session.server.record;
  if (!initialize || session.protocolVersion === undefined) return undefined;
  const record: RestoreRecord = { initialize: initialize as RestoreRecord['initialize'], protocolVersion: session.protocolVersion };
  if (loggingLevel !== undefined) record.loggingLevel = loggingLevel;
  const { subscriptions } = session.server.record;
  if (subscriptions.size > 0) record.subscriptions = [...subscriptions.values()] as Record<string, unknown>[];
  return record;
}

/**
 * Makes a new session the one a record describes (it lived on an instance that is gone): it
 * starts hibernated, so its next POST builds a server and replays the client's handshake to it.
 * Its streams from before carry no call running here (see cluster/lost-calls.ts).
 */
export function restoreFromRecord(session: RecordedSession, record: RestoreRecord): void {
  session.server.record.initialize = record.initialize as JSONRPCRequest;
  session.server.record.loggingLevel = record.loggingLevel;
  for (const params of record.subscriptions ?? []) session.server.record.remember({ method: 'resources/subscribe', params });
  session.protocolVersion = record.protocolVersion;
  session.server.hibernated = true;
  session.restored = true;
}
