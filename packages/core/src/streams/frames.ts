/** SSE frames as written on the wire. Every outgoing message is serialized exactly once. */

/** Response headers of every SSE stream. */
export const SSE_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache, no-transform',
  // Stops nginx and similar proxies from buffering the stream.
  'x-accel-buffering': 'no',
};

/** Response headers of a JSON answer. */
export const JSON_HEADERS: Readonly<Record<string, string>> = { 'content-type': 'application/json' };

/** The first event of a resumable stream: an id and empty data, so the client holds a cursor. */
export function primingEvent(eventId: string, retryMs: number | undefined): string {
  return retryMs === undefined ? `id: ${eventId}\ndata: \n\n` : `id: ${eventId}\nretry: ${retryMs}\ndata: \n\n`;
}

export function messageEvent(eventId: string | undefined, json: string): string {
  // join() builds one flat string. A template literal builds a rope of its pieces (the id, the
  // JSON, the separators) that V8 keeps as is, and writing it to a socket does not flatten it; a
  // frame is stored until it is evicted, so the rope would be several objects for every GC to walk.
  return eventId === undefined ? ['data: ', json, '\n\n'].join('') : ['id: ', eventId, '\ndata: ', json, '\n\n'].join('');
}

/** Written right before the server ends a stream, so one close can set its own reconnect pace. */
export function retryField(retryMs: number): string {
  return `retry: ${retryMs}\n\n`;
}

export const KEEP_ALIVE = ': keep-alive\n\n';

/** The response headers of one session's streams and answers: the same every time, so built once. */
export class ResponseHeaders {
  private sseHeaders: Record<string, string> | undefined;
  private jsonHeaders: Record<string, string> | undefined;

  constructor(private readonly sessionId: string | undefined) {}

  get sse(): Readonly<Record<string, string>> {
    if (this.sessionId === undefined) return SSE_HEADERS;
    return (this.sseHeaders ??= { ...SSE_HEADERS, 'mcp-session-id': this.sessionId });
  }

  get json(): Readonly<Record<string, string>> {
    if (this.sessionId === undefined) return JSON_HEADERS;
    return (this.jsonHeaders ??= { ...JSON_HEADERS, 'mcp-session-id': this.sessionId });
  }
}
