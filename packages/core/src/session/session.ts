import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type { JSONRPCMessage, JSONRPCRequest, MessageExtraInfo, RequestId } from '@modelcontextprotocol/sdk/types.js';
import { eventId, randomId } from '../events/ids.js';
import type { StreamKey } from '../events/store.js';
import type { ResolvedOptions } from '../options.js';
import { SseConnection } from '../streams/connection.js';
import { messageEvent, primingEvent } from '../streams/frames.js';
import { Stream } from '../streams/stream.js';
import type { HeaderMap } from '../http/rules.js';

const RESOLVED: Promise<void> = Promise.resolve();

/** Ids of the requests a session sends its own server to restore it; no client id starts with NUL. */
const RESTORE_ID_PREFIX = '\u0000mcp-kit:restore:';

/** Per-connection context the core passes in from the HTTP layer. */
export interface Inbound {
  headers: HeaderMap;
  url?: URL | undefined;
  authInfo?: AuthInfo | undefined;
}

/**
 * One MCP session: the SDK `Transport` its `McpServer` is connected to, plus the registry of its
 * streams. `send(message, { relatedRequestId })` routes each outgoing message to the stream of
 * the request it belongs to; messages of no request go to the standalone GET stream.
 */
export class Session implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void;

  /** Negotiated protocol version, learned from the initialize response. */
  protocolVersion: string | undefined;
  lastActive: number;
  closed = false;
  /** Principal that created the session; later requests must carry the same. */
  owner: string | undefined;
  /** Open connections (any stream). A session with one is never idle. */
  openConnections = 0;
  /** Response headers the handler builds once per session (they carry its id). */
  readonly responseHeaders: { sse?: Record<string, string>; json?: Record<string, string> } = {};

  private readonly streams = new Map<string, Stream>();
  private readonly byRequest = new Map<RequestId, Stream>();
  private standalone: Stream | undefined;
  private server: { close(): Promise<void> } | undefined;

  // --- Hibernation: the server of an idle session is let go and rebuilt on its next POST -----
  /** The session's server was released; {@link restore} connects a new one. */
  hibernated = false;
  /** A restore in progress, shared by the requests that arrive during it. */
  waking: Promise<void> | undefined;
  /** The client's initialize request and its last `logging/setLevel`: replayed to a new server. */
  private initializeRequest: JSONRPCRequest | undefined;
  private loggingLevel: JSONRPCRequest['params'] | undefined;
  /** Requests the server sent the client that are not answered yet (sampling, elicitation...). */
  private readonly awaitingClient = new Set<RequestId>();
  /** Answers due from the server to the restore requests. */
  private readonly restoring = new Map<RequestId, (error: string | undefined) => void>();
  private restoreSeq = 0;

  constructor(
    /** `undefined` in stateless mode. */
    readonly sessionId: string | undefined,
    private readonly options: ResolvedOptions,
    private readonly live: Set<SseConnection>,
    private readonly onTerminated: (session: Session) => void,
  ) {
    this.lastActive = Date.now();
  }

  // --- SDK Transport -----------------------------------------------------------------------

  async start(): Promise<void> {}

  send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    if (this.closed) return Promise.reject(new Error('MCP session is closed'));
    let stream: Stream | undefined;
    let responseTo: RequestId | undefined;
    if ('id' in message && !('method' in message)) {
      responseTo = message.id as RequestId;
      if (this.restoring.size > 0 && this.restoring.has(responseTo)) return this.restored(message);
      stream = this.byRequest.get(responseTo);
      if (stream && 'result' in message && this.protocolVersion === undefined) {
        const version = (message.result as { protocolVersion?: unknown }).protocolVersion;
        if (typeof version === 'string') this.protocolVersion = version;
      }
    } else {
      if ('id' in message) this.awaitingClient.add(message.id as RequestId);
      else if ('method' in message && message.method === 'notifications/cancelled')
        this.awaitingClient.delete((message.params as { requestId?: RequestId } | undefined)?.requestId as RequestId);
      stream = options?.relatedRequestId !== undefined ? this.byRequest.get(options.relatedRequestId) : this.standalone;
    }
    // Nowhere to deliver: a request that already got its answer, or no GET stream ever opened.
    if (!stream) return RESOLVED;
    return this.deliver(stream, message, responseTo);
  }

  async close(): Promise<void> {
    if (this.hibernated && !this.closed) return this.detach();
    this.terminate(undefined);
  }

  // --- Streams -------------------------------------------------------------------------------

  /** Binds the server so terminate() can close it. */
  attachServer(server: { close(): Promise<void> }): void {
    this.server = server;
  }

  isInFlight(id: RequestId): boolean {
    return this.byRequest.has(id);
  }

  /** Opens the response stream of a POST that carries requests. */
  openRequestStream(requestIds: RequestId[], resumable: boolean, closable: boolean): Stream {
    const stream = new Stream(randomId(), 'request', new Set(requestIds), resumable, closable);
    this.streams.set(stream.id, stream);
    for (const id of requestIds) this.byRequest.set(id, stream);
    return stream;
  }

  /** The standalone GET stream, created on the first GET. */
  standaloneStream(resumable: boolean, closable: boolean): Stream {
    if (!this.standalone) {
      this.standalone = new Stream(randomId(), 'standalone', new Set(), resumable, closable);
      this.streams.set(this.standalone.id, this.standalone);
    }
    this.standalone.closable = closable;
    return this.standalone;
  }

  activeStream(streamId: string): Stream | undefined {
    return this.streams.get(streamId);
  }

  streamKey(stream: Stream): StreamKey {
    // Made once per stream: every stored frame passes it to the store.
    return (stream.key ??= { sessionId: this.sessionId as string, streamId: stream.id });
  }

  /** Forgets a stream that never went on the wire (its store registration failed). */
  dropStream(stream: Stream): void {
    this.streams.delete(stream.id);
    for (const id of stream.pending) this.byRequest.delete(id);
    if (this.standalone === stream) this.standalone = undefined;
  }

  /** Puts a new connection under a stream, replacing a stale one. */
  attach(stream: Stream, conn: SseConnection): void {
    const previous = stream.conn;
    // A request whose client left while we read the store must not push out a newer, live connection.
    const replaces = !conn.closed;
    if (replaces) stream.conn = conn;
    this.openConnections++;
    this.live.add(conn);
    conn.onClose(() => {
      this.openConnections--;
      this.live.delete(conn);
      this.lastActive = Date.now();
      if (stream.conn === conn) stream.conn = undefined;
      // Nobody can resume a stateless stream: stop its work when the client leaves.
      if (this.sessionId === undefined && !stream.complete) this.terminate(undefined);
    });
    // A replaced connection may still be read: end it as a server close, so its client comes back.
    if (replaces && previous && previous !== conn) previous.end(stream.closable ? (stream.retryMs ?? this.options.retryMs) : undefined);
    if (this.options.maxStreamDurationMs !== undefined && stream.closable) {
      const timer = setTimeout(() => conn.end(this.options.retryMs), this.options.maxStreamDurationMs);
      conn.onClose(() => clearTimeout(timer));
    }
  }

  /** Writes the priming event: a cursor into the stream and the retry hint. */
  prime(streamId: string, seq: number, conn: SseConnection, retryMs: number = this.options.retryMs): void {
    conn.write(primingEvent(eventId(streamId, seq), retryMs));
  }

  get hasStandalone(): boolean {
    return this.standalone !== undefined;
  }

  newConnection(sink: ConstructorParameters<typeof SseConnection>[0]): SseConnection {
    return new SseConnection(sink, this.options.maxBufferedBytes, this.overflowed, Date.now());
  }

  private readonly overflowed = (conn: SseConnection): void => conn.end(this.options.retryMs);
  private readonly closeStandaloneFn = (retryMs?: number): boolean => this.closeStandalone(retryMs);

  /** Hands incoming messages to the SDK, with the per-request SEP-1699 controls in `extra`. */
  dispatch(messages: JSONRPCMessage[], inbound: Inbound): void {
    // The client left (or the session ended) before we got here: no work for nobody.
    if (this.closed) return;
    const requestInfo = { headers: inbound.headers as Record<string, string | string[] | undefined>, url: inbound.url };
    for (const message of messages) {
      const extra: MessageExtraInfo = { authInfo: inbound.authInfo, requestInfo: requestInfo as MessageExtraInfo['requestInfo'] };
      if ('method' in message && 'id' in message) {
        const id = message.id as RequestId;
        extra.closeSSEStream = ((retryMs?: number) => this.closeRequestStream(id, retryMs)) as () => void;
        extra.closeStandaloneSSEStream = this.closeStandaloneFn as () => void;
        if (message.method === 'initialize') this.initializeRequest ??= message;
        else if (message.method === 'logging/setLevel') this.loggingLevel = message.params;
      } else if ('id' in message && this.awaitingClient.size > 0) {
        this.awaitingClient.delete(message.id as RequestId);
      }
      this.onmessage?.(message, extra);
      if ('method' in message && message.method === 'notifications/cancelled' && !('id' in message)) {
        this.releaseCancelled((message.params as { requestId?: unknown } | undefined)?.requestId);
      }
    }
  }

  /**
   * The SDK aborts a cancelled request's handler and sends it no response, so nothing would ever
   * end its stream or free its id. Release it as if answered. (The SDK ignores a falsy id; so do we.)
   */
  private releaseCancelled(requestId: unknown): void {
    if ((typeof requestId !== 'string' && typeof requestId !== 'number') || !requestId) return;
    const stream = this.byRequest.get(requestId);
    if (!stream || stream.json || !stream.pending.delete(requestId)) return;
    this.byRequest.delete(requestId);
    if (stream.kind !== 'request' || stream.pending.size > 0) return;
    // Frames still on their way to an asynchronous store go out first.
    if (stream.tail) void stream.tail.then(() => this.finish(stream));
    else this.finish(stream);
  }

  closeRequestStream(id: RequestId, retryMs?: number): boolean {
    return this.closeStream(this.byRequest.get(id), retryMs);
  }

  closeStandalone(retryMs?: number): boolean {
    return this.closeStream(this.standalone, retryMs);
  }

  /** SEP-1699 close: `retry:` then end; the stream itself lives on and keeps storing events. */
  private closeStream(stream: Stream | undefined, retryMs: number | undefined): boolean {
    if (!stream || !stream.closable) return false;
    if (retryMs !== undefined) stream.retryMs = retryMs;
    const retry = retryMs ?? stream.retryMs ?? this.options.retryMs;
    stream.conn?.end(retry);
    this.closeRemoteTails(stream, retry);
    return true;
  }

  /** In a cluster the client may be following this stream from another instance: end that tail too. */
  private closeRemoteTails(stream: Stream, retryMs: number): void {
    const store = this.options.eventStore;
    if (!store.closeTails || !stream.resumable || this.sessionId === undefined) return;
    const key = this.streamKey(stream);
    const seq = stream.seq;
    // Behind the appends still in flight, so a tail delivers every frame sent before the close.
    void (stream.tail ?? RESOLVED)
      .then(() => store.closeTails!(key, seq, retryMs))
      .catch((error: unknown) => this.options.onError(asError(error, 'event store closeTails failed')));
  }

  /**
   * Nothing would be lost by letting the server go: no request is in flight either way and no
   * stream is mid-response. An open standalone GET stream stays open; it just has no server behind it.
   */
  get canHibernate(): boolean {
    if (this.closed || this.hibernated || this.waking || !this.server || !this.initializeRequest) return false;
    if (this.awaitingClient.size > 0 || this.byRequest.size > 0) return false;
    for (const stream of this.streams.values()) if (stream.kind === 'request' || stream.tail) return false;
    return true;
  }

  /** Closes the session's server (its `onclose` runs) and keeps what {@link restore} needs. */
  hibernate(): boolean {
    if (!this.canHibernate) return false;
    this.hibernated = true;
    const server = this.server!;
    this.server = undefined;
    // Protocol.close() calls our close(), which detaches instead of ending the session.
    server.close().catch((error: unknown) => this.options.onError(asError(error, 'closing a hibernating server failed')));
    return true;
  }

  private detach(): void {
    const onclose = this.onclose;
    // A new server's connect() chains whatever handlers it finds: leave none of the old one's.
    this.onclose = this.onerror = this.onmessage = undefined;
    onclose?.();
  }

  /**
   * Brings a new server (already connected to this session) to where the released one was: the
   * client's initialize, `notifications/initialized`, and its last `logging/setLevel`.
   */
  async restore(): Promise<void> {
    const init = this.initializeRequest!;
    const failed = await this.restoreRequest('initialize', init.params);
    if (failed !== undefined) throw new Error(`the new server refused the session's initialize: ${failed}`);
    this.onmessage?.({ jsonrpc: '2.0', method: 'notifications/initialized' });
    // A server without the logging capability answers "method not found": then there is no level to restore.
    if (this.loggingLevel !== undefined) await this.restoreRequest('logging/setLevel', this.loggingLevel);
    this.hibernated = false;
  }

  private restoreRequest(method: string, params: JSONRPCRequest['params']): Promise<string | undefined> {
    const id = `${RESTORE_ID_PREFIX}${++this.restoreSeq}`;
    return new Promise((resolve) => {
      this.restoring.set(id, resolve);
      this.onmessage?.({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) }, {});
    });
  }

  private restored(message: JSONRPCMessage): Promise<void> {
    const id = (message as { id: RequestId }).id;
    const settle = this.restoring.get(id)!;
    this.restoring.delete(id);
    const error = (message as { error?: { message?: unknown } }).error;
    settle(error === undefined ? undefined : String(error.message));
    return RESOLVED;
  }

  /** Ends the session: streams, stored events, the server. `retryMs` tells clients to come back (shutdown). */
  terminate(retryMs: number | undefined): void {
    if (this.closed) return;
    this.closed = true;
    for (const stream of this.streams.values()) stream.conn?.end(retryMs);
    this.streams.clear();
    this.byRequest.clear();
    this.standalone = undefined;
    for (const settle of this.restoring.values()) settle('the session ended');
    this.restoring.clear();
    this.onTerminated(this);
    const server = this.server;
    this.server = undefined;
    // Protocol.close() calls our close() again; `closed` makes that a no-op.
    server?.close().catch((error: unknown) => this.options.onError(asError(error)));
    this.onclose?.();
  }

  private deliver(stream: Stream, message: JSONRPCMessage, responseTo: RequestId | undefined): Promise<void> {
    let final = false;
    if (responseTo !== undefined && stream.pending.delete(responseTo)) {
      this.byRequest.delete(responseTo);
      final = stream.kind === 'request' && stream.pending.size === 0;
    }
    if (stream.json) {
      // A JSON body can carry only the answers; notifications have nowhere to go.
      if (responseTo !== undefined) stream.json.messages.push(message);
      if (final) this.finishJson(stream);
      return RESOLVED;
    }
    const json = JSON.stringify(message);
    if (!stream.resumable) {
      stream.conn?.write(messageEvent(undefined, json));
      if (final) this.finish(stream);
      return RESOLVED;
    }
    const seq = ++stream.seq;
    const frame = messageEvent(eventId(stream.id, seq), json);
    let stored: void | Promise<void>;
    try {
      stored = this.options.eventStore.append(this.streamKey(stream), seq, frame, final);
    } catch (error) {
      stored = Promise.reject(error);
    }
    if (stored === undefined && stream.tail === undefined) {
      // Synchronous store: the frame is stored; write it now.
      stream.conn?.write(frame, seq);
      if (final) this.finish(stream);
      return RESOLVED;
    }
    // Asynchronous store: write in order, each frame only once it is stored.
    const previous = stream.tail ?? RESOLVED;
    const tail = previous
      .then(() => stored)
      .catch((error: unknown) => this.options.onError(asError(error, 'event store append failed; frame sent but not resumable')))
      .then(() => {
        stream.conn?.write(frame, seq);
        if (final) this.finish(stream);
        if (stream.tail === tail) stream.tail = undefined;
      });
    stream.tail = tail;
    return tail;
  }

  private finish(stream: Stream): void {
    stream.complete = true;
    this.streams.delete(stream.id);
    // The response is on the wire; a resumed or original stream of a request never lingers.
    stream.conn?.end();
    this.endIfEphemeralAndDone();
  }

  /** A stateless request's server lives exactly as long as its one POST. */
  private endIfEphemeralAndDone(): void {
    if (this.sessionId === undefined && this.streams.size === 0) this.terminate(undefined);
  }

  private finishJson(stream: Stream): void {
    const json = stream.json!;
    stream.json = undefined;
    this.streams.delete(stream.id);
    json.respond(JSON.stringify(json.batch ? json.messages : json.messages[0]));
    this.endIfEphemeralAndDone();
  }
}

export function asError(error: unknown, context?: string): Error {
  const e = error instanceof Error ? error : new Error(String(error));
  if (context) e.message = `${context}: ${e.message}`;
  return e;
}
