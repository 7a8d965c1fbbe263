/** One parsed SSE event, as the wire carried it. */
export interface SseEvent {
  id?: string;
  retry?: number;
  data?: string;
  /** The raw frame text, for assertions on the bytes. */
  raw: string;
}

/**
 * Reads an SSE body event by event, as it arrives. `events()` yields each event once its blank-line
 * terminator has been received, so a test can act (abort, resume) in the middle of a stream.
 */
export async function* sseEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end: number;
      while ((end = buffer.indexOf('\n\n')) !== -1) {
        const raw = buffer.slice(0, end + 2);
        buffer = buffer.slice(end + 2);
        const event = parseFrame(raw);
        if (event) yield event;
      }
    }
  } finally {
    reader.releaseLock();
  }
}

function parseFrame(raw: string): SseEvent | undefined {
  const event: SseEvent = { raw };
  let fields = 0;
  for (const line of raw.split('\n')) {
    if (line === '' || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const name = colon === -1 ? line : line.slice(0, colon);
    const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
    fields++;
    if (name === 'id') event.id = value;
    else if (name === 'retry') event.retry = Number(value);
    else if (name === 'data') event.data = event.data === undefined ? value : `${event.data}\n${value}`;
  }
  // A keep-alive comment carries no field.
  return fields === 0 ? undefined : event;
}

/** Collects a whole SSE body. */
export async function readAll(body: ReadableStream<Uint8Array>): Promise<SseEvent[]> {
  const out: SseEvent[] = [];
  for await (const e of sseEvents(body)) out.push(e);
  return out;
}

/** JSON-RPC messages in a list of events (skipping priming and retry-only events). */
export function messages(events: SseEvent[]): Array<Record<string, any>> {
  return events.filter((e) => e.data !== undefined && e.data !== '').map((e) => JSON.parse(e.data as string));
}
