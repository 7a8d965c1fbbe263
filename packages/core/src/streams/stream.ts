import type { JSONRPCMessage, RequestId } from '@modelcontextprotocol/sdk/types.js';
import type { StreamKey } from '../events/store.js';
import type { SseConnection } from './connection.js';

/**
 * A logical SSE stream: the response stream of one POST, or the session's standalone GET stream.
 * It has an id (the token in its event ids) and a sequence; connections come and go beneath it.
 */
export class Stream {
  seq = 0;
  conn: SseConnection | undefined;
  complete = false;
  /** The retry the last closeSSEStream asked for; resumed streams repeat it so the pace sticks. */
  retryMs: number | undefined;
  /** Pending store writes, when the store is asynchronous; frames go out in order behind it. */
  tail: Promise<void> | undefined;
  /** The store's key for this stream (see Session.streamKey). */
  key: StreamKey | undefined;
  /** JSON-response mode: the answers gathered until the last one arrives. */
  json: { messages: JSONRPCMessage[]; batch: boolean; respond: (body: string) => void } | undefined;

  constructor(
    readonly id: string,
    readonly kind: 'request' | 'standalone',
    /** Requests whose responses are still due on this stream. */
    readonly pending: Set<RequestId>,
    /** Frames carry ids and are stored, so the stream can be resumed. */
    readonly resumable: boolean,
    /** The client got a priming event and can resume a POST stream the server closes. */
    public closable: boolean,
  ) {}
}
