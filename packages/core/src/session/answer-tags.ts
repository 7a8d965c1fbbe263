import type { JSONRPCMessage, RequestId } from '../ports/mcp.js';

/**
 * Shared mode (serverless, see `SessionCopies`) runs copies of one session on several
 * instances, each with its own server numbering its requests to the client from 0. So the
 * requests a copy's server sends go out under `<prefix><its id>`, the prefix naming this instance
 * and copy (`<instance id>~<nonce>~`): the client's answer, whichever instance it reaches, says
 * which one waits for it (cluster/shared-copies.ts), and reaches the server under its own id.
 */
export class AnswerTags {
  /** The ids on the wire, and the server's own, until answered. */
  private readonly ids = new Map<string, RequestId>();

  constructor(private readonly prefix: string) {}

  /** Whether `id` is a tagged id of a request still awaiting its answer. */
  has(id: unknown): boolean {
    return typeof id === 'string' && this.ids.has(id);
  }

  /** A request of the server goes out under its tagged id; a cancel of one names it so too. */
  tag(message: JSONRPCMessage): JSONRPCMessage {
    if ('id' in message) {
      const wire = `${this.prefix}${String(message.id)}`;
      this.ids.set(wire, message.id as RequestId);
      return { ...message, id: wire };
    }
    if (!('method' in message) || message.method !== 'notifications/cancelled') return message;
    const params = message.params as { requestId?: unknown } | undefined;
    const wire = `${this.prefix}${String(params?.requestId)}`;
    if (!this.ids.delete(wire)) return message;
    return { ...message, params: { ...params, requestId: wire } };
  }

  /** The client's answer to a tagged request, under the server's own id. */
  untag(message: JSONRPCMessage): JSONRPCMessage {
    if ('method' in message || !('id' in message) || typeof message.id !== 'string') return message;
    const own = this.ids.get(message.id);
    if (own === undefined) return message;
    this.ids.delete(message.id);
    return { ...message, id: own } as JSONRPCMessage;
  }
}

/** The instance a tagged id names (`<instance id>~<nonce>~<the server's id>`); `undefined` for any other id. */
export function instanceOfTag(id: unknown): string | undefined {
  if (typeof id !== 'string') return undefined;
  const nonceAt = id.lastIndexOf('~', id.lastIndexOf('~') - 1);
  return nonceAt > 0 ? id.slice(0, nonceAt) : undefined;
}
