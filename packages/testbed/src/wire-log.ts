/**
 * A fetch that records every exchange a TypeScript client makes, bodies included, so a test can
 * assert on what crossed the wire and not only on what the client chose to surface.
 */
import { messagesOf, parseSse } from './sse.js';

export interface Exchange {
  method: string;
  headers: Headers;
  /** The JSON-RPC message posted, if any. */
  body?: any;
  status?: number;
  contentType?: string;
  /** The response body as received so far (SSE text or JSON). */
  text: string;
}

/** Everything a client sent and received through {@link WireLog.fetch}. */
export class WireLog {
  readonly exchanges: Exchange[] = [];

  readonly fetch: typeof fetch = async (input, init) => {
    const body = typeof init?.body === 'string' ? JSON.parse(init.body) : undefined;
    const exchange: Exchange = { method: init?.method ?? 'GET', headers: new Headers(init?.headers), body, text: '' };
    this.exchanges.push(exchange);
    const response = await fetch(input, init);
    exchange.status = response.status;
    exchange.contentType = response.headers.get('content-type') ?? undefined;
    if (!response.body) return response;
    const decoder = new TextDecoder();
    const copy = new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        exchange.text += decoder.decode(chunk, { stream: true });
        controller.enqueue(chunk);
      },
    });
    return new Response(response.body.pipeThrough(copy), {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };

  /** Posted JSON-RPC requests with this method. */
  posted(method: string): Exchange[] {
    return this.exchanges.filter((e) => e.method === 'POST' && e.body?.method === method);
  }

  /** GETs carrying Last-Event-ID: the client coming back for a stream the server closed. */
  get resumes(): Exchange[] {
    return this.exchanges.filter((e) => e.method === 'GET' && e.headers.has('last-event-id'));
  }

  /** Every JSON-RPC message the server sent, on any response, in arrival order per response. */
  received(): any[] {
    return this.exchanges.flatMap((e) => messagesIn(e));
  }

  /** Responses (result or error) for request `id`, across every stream. */
  responsesTo(id: unknown): any[] {
    return this.received().filter((m) => m.id === id && ('result' in m || 'error' in m));
  }
}

function messagesIn(exchange: Exchange): any[] {
  if (!exchange.text) return [];
  if (!exchange.contentType?.startsWith('text/event-stream')) {
    const parsed = JSON.parse(exchange.text);
    return Array.isArray(parsed) ? parsed : [parsed];
  }
  return messagesOf(parseSse(exchange.text));
}
