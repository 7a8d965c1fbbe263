/** SSE frames as written on the wire. Every outgoing message is serialized exactly once. */

/** The first event of a resumable stream: an id and empty data, so the client holds a cursor. */
export function primingEvent(eventId: string, retryMs: number | undefined): string {
  return retryMs === undefined ? `id: ${eventId}\ndata: \n\n` : `id: ${eventId}\nretry: ${retryMs}\ndata: \n\n`;
}

export function messageEvent(eventId: string | undefined, json: string): string {
  return eventId === undefined ? `data: ${json}\n\n` : `id: ${eventId}\ndata: ${json}\n\n`;
}

/** Written right before the server ends a stream, so one close can set its own reconnect pace. */
export function retryField(retryMs: number): string {
  return `retry: ${retryMs}\n\n`;
}

export const KEEP_ALIVE = ': keep-alive\n\n';
