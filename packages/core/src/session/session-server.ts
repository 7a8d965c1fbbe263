import type { JSONRPCMessage, JSONRPCRequest, RequestId } from '../ports/mcp.js';
import type { SdkMajor } from '../sdk/connectable-server.js';
import { asError } from '../util/errors.js';
import { Restorer, SessionRecord } from './record.js';
import type { AnswerTags } from './answer-tags.js';

/**
 * The server behind a session: attached at initialize, closed when the session hibernates (nothing
 * would be lost), rebuilt from the session's {@link SessionRecord} on its next POST. A server with a
 * question pending for the client (sampling, elicitation) never hibernates, so this also tracks those.
 */
export class SessionServer {
  /** The server is closed until the next POST (see `hibernateAfterMs`), or is not built yet (see {@link defer}). */
  hibernated = false;
  /** No server was ever built for the session: its first is built at its first request (see `lazyServers`). */
  deferred = false;
  /** Told a server's answer to the session's `initialize`, once it goes out (see `InitializeAnswers`). */
  answeredInitialize: ((result: Record<string, unknown>) => void) | undefined;
  readonly record = new SessionRecord();
  /** Which SDK the server is of: v2 handlers also get a fetch `Request` (`ctx.http.req`). */
  major: SdkMajor = 'v1';
  private server: { close(): Promise<void> } | undefined;
  /** When several copies may run the session's calls (shared mode): the server's requests go out under ids that name this instance. */
  answerTags: AnswerTags | undefined;
  /** Requests the server sent the client that are not answered yet. */
  private readonly awaitingClient = new Set<RequestId>();
  private readonly restorer: Restorer;
  /** A restore in progress, shared by the requests that arrive during it. */
  private waking: Promise<void> | undefined;

  constructor(toServer: (message: JSONRPCMessage) => void) {
    this.restorer = new Restorer(toServer);
  }

  attach(server: { close(): Promise<void> }, major: SdkMajor): void {
    this.server = server;
    this.major = major;
  }

  /**
   * A session whose `initialize` is answered without a server (see `lazyServers`): it starts as a
   * hibernated one does, and {@link wake} builds its first server from the client's `initialize`.
   */
  defer(initialize: JSONRPCRequest): void {
    this.record.observe(initialize);
    this.hibernated = true;
    this.deferred = true;
  }

  /**
   * A request or notification the server sends: a request now awaits the client; a cancel
   * withdraws one. Returns the message to send (tagged, see {@link answerTags}).
   */
  sent(message: JSONRPCMessage): JSONRPCMessage {
    if (this.answerTags) message = this.answerTags.tag(message);
    if ('id' in message) this.awaitingClient.add(message.id as RequestId);
    else if ('method' in message && message.method === 'notifications/cancelled') {
      this.awaitingClient.delete((message.params as { requestId?: RequestId } | undefined)?.requestId as RequestId);
    }
    return message;
  }

  /**
   * A message from the client: a request may change the record; an answer settles what the server
   * awaited. Returns the message for the server (an answer under the server's own id).
   */
  received(message: JSONRPCMessage): JSONRPCMessage {
    if ('method' in message) {
      if ('id' in message) this.record.observe(message as JSONRPCRequest);
    } else if (this.awaitingClient.size > 0) {
      this.awaitingClient.delete((message as { id: RequestId }).id);
    }
    return this.answerTags ? this.answerTags.untag(message) : message;
  }

  /** Whether `id` is that of a request the server sent (tagged, see {@link answerTags}) and still awaits. */
  awaitsAnswer(id: unknown): boolean {
    return this.answerTags?.has(id) ?? false;
  }

  /**
   * The client set a log level or (un)subscribed through another copy (shared mode): the
   * record takes it, and a server attached here hears it as the client's.
   */
  apply(request: { method: string; params?: JSONRPCRequest['params'] }): void {
    if (!this.record.remember(request)) return;
    if (this.server && !this.hibernated && !this.waking) void this.restorer.tell(request.method, request.params);
  }

  /** Swallows the server's answer to a request the restore sent it; `false` for any other answer. */
  consumeRestoreAnswer(message: JSONRPCMessage): boolean {
    return this.restorer.pending && this.restorer.consume(message);
  }

  /** No question pending for the client and no restore under way. */
  get quiet(): boolean {
    return this.awaitingClient.size === 0 && this.waking === undefined;
  }

  /**
   * Whether nothing would be lost by closing the server: no request in flight (`busy` says so
   * for the session's streams) and no question pending for the client.
   */
  canHibernate(busy: boolean): boolean {
    if (this.hibernated || this.waking || !this.server || !this.record.initialize) return false;
    return this.awaitingClient.size === 0 && !busy;
  }

  /** Closes the server (its `onclose` runs) and keeps what {@link wake} needs. */
  hibernate(onError: (error: Error) => void): void {
    this.hibernated = true;
    const server = this.server!;
    this.server = undefined;
    server.close().catch((error: unknown) => onError(asError(error, 'closing a hibernating server failed')));
  }

  /**
   * Connects a new server (`connect` builds and connects one) and replays the record to it.
   * Requests that arrive together share one wake.
   */
  wake(connect: () => Promise<void>): Promise<void> {
    this.waking ??= connect()
      .then(() => this.restorer.replay(this.record))
      .then(() => {
        this.hibernated = false;
        this.deferred = false;
      })
      .finally(() => {
        this.waking = undefined;
      });
    return this.waking;
  }

  /** The session ended: a restore under way fails, and the server closes. */
  end(onError: (error: Error) => void): void {
    this.restorer.abort('the session ended');
    const server = this.server;
    this.server = undefined;
    server?.close().catch((error: unknown) => onError(asError(error)));
  }
}
