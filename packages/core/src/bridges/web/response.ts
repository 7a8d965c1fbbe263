import type { CoreResponder, OutHeaders, SseSink } from '../../ports/http.js';
import { atTurnEnd, BatchingSseSink } from '../sse-writer.js';

const encoder = new TextEncoder();

function call(fn: () => void): void {
  fn();
}

/** Answers a fetch-style request: resolves the pending `Response`, a body or an SSE stream. */
export class WebResponder implements CoreResponder {
  constructor(
    private readonly resolve: (response: Response) => void,
    private readonly signal: AbortSignal,
  ) {}

  send(status: number, headers: OutHeaders, body: string | undefined): void {
    this.resolve(new Response(status === 202 || status === 204 ? null : (body ?? null), { status, headers }));
  }

  onClose(listener: () => void): void {
    // A fetch handler learns of a client that left only through the request's signal.
    if (this.signal.aborted) listener();
    else this.signal.addEventListener('abort', listener, { once: true });
  }

  stream(headers: OutHeaders): SseSink {
    const sink = new WebSseSink(this.signal);
    this.resolve(new Response(sink.body, { status: 200, headers }));
    // A client that left while the request was being read never fires 'abort' again.
    if (this.signal.aborted) sink.abort();
    return sink;
  }
}

/**
 * One SSE response as a `ReadableStream`. Its high-water mark of 0 makes `desiredSize` minus what
 * is queued, i.e. what the reader has not taken, and makes the stream pull when the reader asks
 * and nothing is queued: that is the drain signal.
 */
class WebSseSink extends BatchingSseSink {
  readonly body: ReadableStream<Uint8Array>;
  private controller!: ReadableStreamDefaultController<Uint8Array>;
  private closed = false;
  /** Waits for the reader to take everything queued (see onDrain). */
  private drainListener: (() => void) | undefined;
  private readonly listeners: Array<() => void> = [];
  private readonly onAbort = (): void => this.abort();

  constructor(private readonly signal: AbortSignal) {
    super();
    this.body = new ReadableStream<Uint8Array>(
      {
        start: (controller) => {
          this.controller = controller;
        },
        pull: () => {
          const listener = this.drainListener;
          this.drainListener = undefined;
          listener?.();
        },
        cancel: () => this.markClosed(),
      },
      { highWaterMark: 0, size: (chunk) => chunk.byteLength },
    );
    signal.addEventListener('abort', this.onAbort);
  }

  protected get done(): boolean {
    return this.closed;
  }

  protected get held(): number {
    // Once closed nothing is held: cancel out the batch that will never be sent.
    return this.closed ? -this.pending.length : -(this.controller.desiredSize ?? 0);
  }

  protected get keepingUp(): boolean {
    return (this.controller.desiredSize ?? 0) >= 0;
  }

  protected emit(chunk: string): void {
    if (chunk !== '') this.controller.enqueue(encoder.encode(chunk));
  }

  /** Hands what this turn wrote to the body now (the runtime sends it as it reads the body). */
  sendNow(): void {
    this.flush();
  }

  end(): void {
    if (this.closed) return;
    this.flush();
    this.markClosed();
    this.closeBody();
  }

  /** The client left: stop writing, and end the body in case the host does not cancel it. */
  abort(): void {
    this.markClosed();
    this.closeBody();
  }

  onClose(listener: () => void): void {
    if (this.closed) listener();
    else this.listeners.push(listener);
  }

  onDrain(listener: () => void): void {
    this.flush();
    if (this.closed || (this.controller.desiredSize ?? 0) >= 0) atTurnEnd(call, listener);
    else this.drainListener = listener;
  }

  private markClosed(): void {
    if (this.closed) return;
    this.closed = true;
    this.signal.removeEventListener('abort', this.onAbort);
    for (const listener of this.listeners) listener();
    this.listeners.length = 0;
  }

  private closeBody(): void {
    try {
      this.controller.close();
    } catch {
      // Already cancelled by the consumer.
    }
  }
}
