import type { Transport, TransportSendOptions } from '../ports/mcp.js';
import type { JSONRPCMessage, JSONRPCRequest, MessageExtraInfo } from '../ports/mcp.js';

const RESOLVED: Promise<void> = Promise.resolve();

/** Where a server's messages about one request go: the HTTP exchange that asked, or the handshake. */
export interface Reply {
  /** The server's response to the request: the exchange is over. */
  answer(message: JSONRPCMessage): void;
  /** A notification or request the server sends about the request while it runs. */
  related(message: JSONRPCMessage): void | Promise<void>;
  /** Whether the server's requests can reach the client through it (a task's become its questions). */
  readonly asks?: boolean;
}

/**
 * The transport a 2026-era server is connected to: one server answers many requests at once,
 * from any client, as one session of the 2025 era answers many requests. Each request goes in
 * under an id of the channel's own (two clients may both send id 1), and what the server sends
 * back finds its {@link Reply} by that id. Messages that belong to no request (list changes,
 * resource updates) go to `broadcast`, which feeds `subscriptions/listen` streams.
 */
export class ModernChannel implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: <T extends JSONRPCMessage>(message: T, extra?: MessageExtraInfo) => void;
  private readonly replies = new Map<number, Reply>();
  /** Told each time a request in flight here is answered or cancelled (a drain waits for them). */
  onSettled: (() => void) | undefined;
  private seq = 0;
  private closed = false;

  constructor(
    private readonly broadcast: (message: JSONRPCMessage) => void,
    /** A request the server sends outside any exchange has nobody to answer it: refuse it at once. */
    private readonly refuse: (id: string | number, method: string) => void,
  ) {}

  async start(): Promise<void> {}

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const answering = this.replies.size > 0;
    this.replies.clear();
    this.onclose?.();
    if (answering) this.onSettled?.();
  }

  /** Requests in flight on this server. */
  get inFlight(): number {
    return this.replies.size;
  }

  send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    if ('id' in message && !('method' in message)) {
      const id = message.id as number;
      const reply = this.replies.get(id);
      if (reply) {
        this.replies.delete(id);
        reply.answer(message);
        this.onSettled?.();
      }
      return RESOLVED;
    }
    const related = options?.relatedRequestId;
    if (related !== undefined) {
      const reply = this.replies.get(related as number);
      // A plain 2026 request has no way to ask its client anything: the server hears so at once.
      if (reply && (reply.asks || !('id' in message))) return reply.related(message) ?? RESOLVED;
    }
    if ('id' in message) this.refuse(message.id as string | number, (message as JSONRPCRequest).method);
    else this.broadcast(message);
    return RESOLVED;
  }

  /** Hands a request to the server under an id of the channel's; returns that id. */
  request(message: JSONRPCRequest, extra: MessageExtraInfo, reply: Reply): number {
    const id = ++this.seq;
    this.replies.set(id, reply);
    this.onmessage?.(message.id === id ? message : { ...message, id }, extra);
    return id;
  }

  /** What the server sends about request `id` goes to `reply` from now on (a request that became a task). */
  rebind(id: number, reply: Reply): void {
    if (this.replies.has(id)) this.replies.set(id, reply);
  }

  /** Hands a notification, or an answer to a request the server sent, to the server. */
  deliver(message: JSONRPCMessage, extra?: MessageExtraInfo): void {
    this.onmessage?.(message, extra);
  }

  /** The client of request `id` went away (2026: a closed stream cancels its request). */
  cancel(id: number, reason: string): void {
    if (!this.replies.delete(id)) return;
    this.onmessage?.({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason } });
    this.onSettled?.();
  }
}
