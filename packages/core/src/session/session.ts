import type { JSONRPCMessage, MessageExtraInfo, RequestId, Transport, TransportSendOptions } from '../ports/mcp.js';
import { randomId } from '../events/ids.js';
import { sendRejection, sessionNotFound, unavailable } from '../http/errors.js';
import type { ResolvedOptions } from '../options.js';
import type { CoreResponder } from '../ports/http.js';
import { SseConnection } from '../streams/connection.js';
import { ResponseHeaders } from '../streams/frames.js';
import type { SessionEndReason } from '../telemetry/events.js';
import { watchConnection } from '../telemetry/watch.js';
import { Stream, type AppendHooks, type JsonReply } from '../streams/stream.js';
import { messageExtra, requestInfoOf, type Inbound } from '../sdk/extra.js';
import { asError } from '../util/errors.js';
import { appendHooks } from './end-calls.js';
import { StreamRoutes } from './routes.js';
import { SessionServer } from './session-server.js';
import { Arrivals } from './arrivals.js';

const RESOLVED: Promise<void> = Promise.resolve();

/**
 * One MCP session: the SDK `Transport` its server is connected to, plus the registry of its
 * streams. `send(message, { relatedRequestId })` routes each outgoing message to the stream of
 * the request it belongs to; messages of no request go to the standalone GET stream.
 */
export class Session implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void;

  /** Negotiated protocol version, learned from the initialize response. */
  protocolVersion: string | undefined;
  /** When the session last saw a request or lost a connection; the idle TTL counts from here. */
  lastActive: number;
  closed = false;
  /** Open connections (any stream). A session with one is never idle. */
  openConnections = 0;
  /** Whom `maxSessionsPerPrincipal` counts this session for: its principal, or its client's address. */
  holder: string | undefined;
  /** A copy restored from its record (see `restoreFromRecord`), not created here by its `initialize`. */
  restored = false;
  /** What is on its way to it while it looks idle: its `initialize`, requests that found it, a restore. */
  readonly arrivals = new Arrivals(() => this.onSettled?.());
  /** Told each time it may have become idle, while something waits for that (`SessionRegistry.watchSettled`). */
  onSettled: (() => void) | undefined;
  /** The server behind the session, and what hibernation keeps to rebuild it. */
  readonly server = new SessionServer((message) => this.onmessage?.(message, {}));
  /** Its streams: which carries what (read by the engine's resume for the client's time away). */
  readonly routes = new StreamRoutes(() => this.onSettled?.());

  constructor(
    /** `undefined` in stateless mode. */
    readonly sessionId: string | undefined,
    /** Principal that created the session; later requests must carry the same. */
    readonly principal: string | undefined,
    private readonly options: ResolvedOptions,
    private readonly live: Set<SseConnection>,
    /** `handoff`: the session lives on elsewhere (its stored events and record stay). */
    private readonly onTerminated: (session: Session, reason: SessionEndReason) => void,
  ) {
    this.lastActive = Date.now();
    this.headers = new ResponseHeaders(sessionId);
    this.appendHooks = appendHooks(this, options, (stream) => this.finish(stream));
  }

  /** Its response headers (they carry its id), built once. */
  readonly headers: ResponseHeaders;

  // --- SDK Transport -----------------------------------------------------------------------

  async start(): Promise<void> {}

  send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    if (this.closed) return Promise.reject(new Error('MCP session is closed'));
    let stream: Stream | undefined;
    let responseTo: RequestId | undefined;
    if ('id' in message && !('method' in message)) {
      if (this.server.consumeRestoreAnswer(message)) return RESOLVED;
      responseTo = message.id as RequestId;
      stream = this.routes.forRequest(responseTo);
      if (stream && 'result' in message && this.protocolVersion === undefined) {
        const version = (message.result as { protocolVersion?: unknown }).protocolVersion;
        if (typeof version === 'string') {
          this.protocolVersion = version;
          this.server.answeredInitialize?.(message.result as Record<string, unknown>);
          // The handshake is complete: another instance could restore the session (shared: once saved).
          const saving = this.server.record.changed?.();
          if (saving) return saving.then(() => this.deliver(stream!, message, responseTo));
        }
      }
    } else {
      message = this.server.sent(message);
      if (this.onSettled && 'method' in message && message.method === 'notifications/cancelled') this.onSettled(); // a question withdrawn
      stream = options?.relatedRequestId !== undefined ? this.routes.forRequest(options.relatedRequestId) : this.routes.standalone;
    }
    // Nowhere to deliver: a request that already got its answer, or no GET stream ever opened.
    if (!stream) return RESOLVED;
    return this.deliver(stream, message, responseTo);
  }

  async close(): Promise<void> {
    if (this.server.hibernated && !this.closed) return this.detachServer();
    this.terminate(undefined, 'delete');
  }

  // --- Requests in ---------------------------------------------------------------------------

  /** A request for this session arrived (here, or on another instance): it is not idle. */
  touch(now: number = Date.now()): void {
    this.lastActive = now;
  }

  isInFlight(id: RequestId): boolean {
    return this.routes.forRequest(id) !== undefined;
  }

  /** Hands incoming messages to the server, with the per-request SEP-1699 controls in `extra`. */
  dispatch(messages: JSONRPCMessage[], inbound: Inbound): void {
    // The client left (or the session ended) before we got here: no work for nobody.
    if (this.closed) return;
    const requestInfo = requestInfoOf(inbound);
    const forV2 = this.server.major === 'v2';
    for (const message of messages) {
      let extra: MessageExtraInfo;
      if ('method' in message && 'id' in message) {
        const id = message.id as RequestId;
        extra = messageExtra(inbound, requestInfo, forV2, (retryMs) => this.closeRequestStream(id, retryMs), this.closeStandaloneFn);
      } else extra = messageExtra(inbound, requestInfo, forV2);
      this.onmessage?.(this.server.received(message), extra);
      if ('method' in message && message.method === 'notifications/cancelled' && !('id' in message)) {
        this.releaseCancelled((message.params as { requestId?: unknown } | undefined)?.requestId);
      }
    }
    if (this.onSettled && messages.some((message) => !('method' in message))) this.onSettled(); // a question answered
  }

  // --- Streams -------------------------------------------------------------------------------

  /** Opens the response stream of a POST that carries requests. */
  openRequestStream(requestIds: RequestId[], resumable: boolean, polling: boolean): Stream {
    return this.routes.add(new Stream(randomId(), this.sessionId, 'request', new Set(requestIds), resumable, polling));
  }

  /** JSON-response mode: the answers to `requestIds` are gathered and sent as one body. */
  openJsonReply(requestIds: RequestId[], reply: JsonReply): Stream {
    return this.routes.add(new Stream(randomId(), this.sessionId, 'request', new Set(requestIds), false, false, reply));
  }

  /** The standalone GET stream, created on the first GET; `created` says whether this call made it. */
  standaloneStream(polling: boolean): { stream: Stream; created: boolean } {
    let stream = this.routes.standalone;
    const created = stream === undefined;
    stream ??= this.routes.standalone = this.routes.add(new Stream(randomId(), this.sessionId, 'standalone', new Set(), true, polling));
    stream.polling = polling;
    return { stream, created };
  }

  activeStream(streamId: string): Stream | undefined {
    return this.routes.get(streamId);
  }

  /**
   * Puts a stream on the wire: registers it with the store when `register` (a cursor into it must
   * be valid before the priming event hands one out), opens the SSE response, primes it when the
   * client polls, and attaches the connection. `false`, or a promise of it, when the store refused
   * (the 503 is sent). A synchronous store answers without a promise, so a POST takes no extra hop.
   */
  openStream(stream: Stream, res: CoreResponder, register: boolean): boolean | Promise<boolean> {
    if (register) {
      let created: void | Promise<void>;
      try {
        created = stream.register(this.options.eventStore);
      } catch (error) {
        return this.neverOpened(stream, res, error);
      }
      if (created !== undefined) {
        return created.then(
          () => (this.closed ? this.neverOpened(stream, res) : this.putOnWire(stream, res)),
          (error: unknown) => this.neverOpened(stream, res, error),
        );
      }
    }
    return this.putOnWire(stream, res);
  }

  /** Opens an SSE response for this session (a resume replays into it before it follows a stream). */
  newConnection(res: CoreResponder): SseConnection {
    return new SseConnection(res.stream(this.headers.sse), this.options.maxBufferedBytes, this.overflowed, Date.now());
  }

  /** A resumed connection caught up through frame `replayedThrough`: it carries the stream live from there. */
  follow(stream: Stream, conn: SseConnection, replayedThrough: number): void {
    conn.skipThrough(replayedThrough);
    this.attach(stream, conn);
  }

  closeRequestStream(id: RequestId, retryMs?: number): boolean {
    return this.routes.forRequest(id)?.close(retryMs, this.options) ?? false;
  }

  closeStandalone(retryMs?: number): boolean {
    return this.routes.standalone?.close(retryMs, this.options) ?? false;
  }

  // --- Hibernation ---------------------------------------------------------------------------

  get hibernated(): boolean {
    return this.server.hibernated;
  }

  /** No call running, no response stream open, no question awaiting the client, nothing on its way: nothing here would be lost. */
  get idle(): boolean {
    return !this.closed && !this.arrivals.any && !this.routes.busy && this.server.quiet;
  }

  /** Idle, no client connected, no answer stored for a client yet to come back for it: it can be let go of (a cap, hibernation). */
  get evictable(): boolean {
    return this.idle && this.openConnections === 0 && !this.routes.awaiting(Date.now());
  }

  /** Closes the server if nothing would be lost (see {@link SessionServer.canHibernate}); the copy stays. */
  hibernate(): boolean {
    if (this.closed || !this.server.canHibernate(this.routes.busy)) return false;
    // Protocol.close() calls our close(), which detaches instead of ending the session.
    this.server.hibernate(this.options.onError);
    const { telemetry } = this.options;
    if (telemetry.on) telemetry.sessionEvent('session.hibernate', this.sessionId as string, {});
    return true;
  }

  /**
   * Ends the session here: streams, the server, and (unless handed off: it goes on on another
   * instance) its stored events. `retryMs` tells clients to come back (shutdown, hand-off).
   */
  terminate(retryMs: number | undefined, reason: SessionEndReason = 'error'): void {
    if (this.closed) return;
    this.closed = true;
    this.routes.endAll(retryMs);
    this.onTerminated(this, reason);
    // Protocol.close() calls our close() again; `closed` makes that a no-op.
    this.server.end(this.options.onError);
    this.onclose?.();
  }

  // --- Internals -----------------------------------------------------------------------------

  private putOnWire(stream: Stream, res: CoreResponder): true {
    const conn = this.newConnection(res);
    conn.pace = stream.retryMs ?? this.options.retryMs;
    if (stream.polling) conn.write(stream.priming(stream.seq, this.options.retryMs));
    if (this.options.telemetry.on && this.sessionId !== undefined) {
      watchConnection(this.options.telemetry, this.sessionId, stream.id, conn, stream.kind === 'request' ? 'post' : 'get');
    }
    this.attach(stream, conn);
    return true;
  }

  /** A stream that never went on the wire: 503 if the store refused it, 404 if the session ended meanwhile (DELETE). */
  private neverOpened(stream: Stream, res: CoreResponder, error?: unknown): false {
    this.routes.remove(stream, this.options.eventStore);
    if (error !== undefined) this.options.onError(asError(error, 'event store createStream failed'));
    const gone = error === undefined;
    sendRejection(res, gone ? sessionNotFound('it was deleted while this request was opened') : unavailable('the event store'));
    return false;
  }

  /** Puts a new connection under a stream, replacing a stale one. */
  private attach(stream: Stream, conn: SseConnection): void {
    const previous = stream.attach(conn);
    this.openConnections++;
    this.live.add(conn);
    conn.onClose(() => {
      this.openConnections--;
      this.live.delete(conn);
      this.lastActive = Date.now();
      stream.detach(conn);
      // Nobody can resume a stateless stream: stop its work when the client leaves.
      if (this.sessionId === undefined && !stream.complete) this.terminate(undefined);
    });
    // A replaced connection may still be read: end it as a server close, so its client comes back.
    previous?.end(stream.polling ? (stream.retryMs ?? this.options.retryMs) : undefined, 'replaced');
    if (this.options.maxStreamDurationMs !== undefined && stream.polling) {
      const timer = setTimeout(() => conn.end(stream.retryMs ?? this.options.retryMs, 'duration'), this.options.maxStreamDurationMs);
      conn.onClose(() => clearTimeout(timer));
    }
  }

  private readonly overflowed = (conn: SseConnection): void => conn.end(conn.pace ?? this.options.retryMs, 'slow-reader');
  private readonly closeStandaloneFn = (retryMs?: number): boolean => this.closeStandalone(retryMs);
  private readonly appendHooks: AppendHooks;

  /**
   * A cancelled request gets no answer from the SDK: its stream ends once what was stored went out;
   * a JSON reply goes out with the answers it has (none: 202, as for a POST of notifications).
   */
  private releaseCancelled(requestId: unknown): void {
    const stream = this.routes.cancelled(requestId);
    if (stream?.json) this.finishJson(stream);
    else if (stream) void stream.afterStored(() => this.finish(stream, true));
  }

  private detachServer(): void {
    const onclose = this.onclose;
    // A new server's connect() chains whatever handlers it finds: leave none of the old one's.
    this.onclose = this.onerror = this.onmessage = undefined;
    onclose?.();
  }

  private deliver(stream: Stream, message: JSONRPCMessage, responseTo: RequestId | undefined): Promise<void> {
    const final = responseTo !== undefined && this.routes.answer(stream, responseTo);
    if (stream.json) {
      // A JSON body can carry only the answers; notifications have nowhere to go.
      if (responseTo !== undefined) stream.json.messages.push(message);
      if (final) this.finishJson(stream);
      return RESOLVED;
    }
    if (stream.lost && responseTo === undefined) return RESOLVED; // an outage ended its calls: answers only
    const json = JSON.stringify(message);
    if (!stream.resumable) {
      stream.writeUnstored(json);
      if (final) this.finish(stream);
      return RESOLVED;
    }
    const stored = stream.append(this.options.eventStore, json, final, this.appendHooks);
    // Storing, a stream is busy: a request stream's final frame says when it is done, a standalone one this.
    if (this.onSettled && stream.kind === 'standalone' && stream.storing) void stored.then(this.onSettled, this.onSettled);
    return stored;
  }

  private finish(stream: Stream, cancelled = false): void {
    stream.complete = true;
    this.routes.complete(stream, this.options, cancelled);
    // The response is on the wire; a resumed or original stream of a request never lingers.
    stream.endConnection(undefined);
    this.streamDone();
  }

  /** A stream is done: a stateless request's server lives exactly as long as its one POST; a session may be idle now. */
  private streamDone(): void {
    if (this.sessionId === undefined && this.routes.size === 0) this.terminate(undefined);
    this.onSettled?.();
  }

  private finishJson(stream: Stream): void {
    const json = stream.json!;
    this.routes.complete(stream, this.options);
    if (json.messages.length === 0) json.respond(undefined);
    else json.respond(JSON.stringify(json.batch ? json.messages : json.messages[0]));
    this.streamDone();
  }
}
