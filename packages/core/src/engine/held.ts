import { sendRejection, type Rejection } from '../http/errors.js';
import type { CoreResponder, OutHeaders, SseSink } from '../ports/http.js';

/**
 * The answer to a request that must not reach its client before a write it depends on is done: a
 * `initialize` in shared mode, whose session exists for the other instances only once its record
 * is in Redis (invariant: stored-before-success). An SSE answer is held (its status and `Mcp-Session-Id` included)
 * until {@link release}; after {@link refuse} the client gets the rejection instead, and the held
 * stream counts as closed by its client. A complete answer (`send`: a JSON body, or a rejection)
 * goes out as it comes: the session sends one only once the write is done, or without it.
 */
export class HeldResponse implements CoreResponder {
  private state: 'held' | 'released' | 'refused' = 'held';
  private sink: HeldSink | undefined;
  readonly onClose: ((listener: () => void) => void) | undefined;

  constructor(private readonly res: CoreResponder) {
    this.onClose = res.onClose?.bind(res);
  }

  send(status: number, headers: OutHeaders, body: string | undefined): void {
    if (this.state === 'refused') return;
    this.state = 'released';
    this.res.send(status, headers, body);
  }

  stream(headers: OutHeaders): SseSink {
    if (this.state === 'released') return this.res.stream(headers);
    // An answer that ends while held (the server refused the handshake: nothing to wait for) goes out as it was.
    this.sink = new HeldSink(headers, () => this.release());
    if (this.state === 'refused') this.sink.gone();
    return this.sink;
  }

  /** The write is done: what was held goes out, and the rest follows as it comes. */
  release(): void {
    if (this.state !== 'held') return;
    this.state = 'released';
    this.sink?.open(this.res.stream(this.sink.headers));
  }

  /** The write failed: the client gets `rejection`, nothing of what was held. */
  refuse(rejection: Rejection): void {
    if (this.state !== 'held') return;
    this.state = 'refused';
    sendRejection(this.res, rejection);
    this.sink?.gone();
  }
}

/** An SSE response not on the wire yet: its frames are kept until it opens, or dropped if it never does. */
class HeldSink implements SseSink {
  private target: SseSink | undefined;
  private frames: string[] = [];
  private heldBytes = 0;
  private ended = false;
  private closed = false;
  private closeListeners: Array<() => void> = [];

  constructor(
    readonly headers: OutHeaders,
    private readonly onEnd: () => void,
  ) {}

  get bufferedBytes(): number {
    return this.target ? this.target.bufferedBytes : this.heldBytes;
  }

  write(chunk: string): boolean {
    if (this.target) return this.target.write(chunk);
    if (!this.closed) {
      this.frames.push(chunk);
      this.heldBytes += chunk.length;
    }
    return true;
  }

  end(): void {
    if (this.target) return this.target.end();
    if (this.ended || this.closed) return;
    this.ended = true;
    this.onEnd();
  }

  onClose(listener: () => void): void {
    if (this.target) this.target.onClose(listener);
    else if (this.closed) listener();
    else this.closeListeners.push(listener);
  }

  onDrain(listener: () => void): void {
    if (this.target?.onDrain) this.target.onDrain(listener);
    else setImmediate(listener);
  }

  /** On the wire at last: what was written goes out, then everything else as it comes. */
  open(target: SseSink): void {
    this.target = target;
    for (const frame of this.frames) target.write(frame);
    this.frames = [];
    for (const listener of this.closeListeners) target.onClose(listener);
    this.closeListeners = [];
    if (this.ended) target.end();
  }

  /** Never to be on the wire: it counts as closed by its client. */
  gone(): void {
    if (this.closed) return;
    this.closed = true;
    this.frames = [];
    const listeners = this.closeListeners;
    this.closeListeners = [];
    for (const listener of listeners) listener();
  }
}
