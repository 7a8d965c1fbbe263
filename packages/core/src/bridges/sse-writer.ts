import type { SseSink } from '../ports/http.js';

/** Frames held for the end of the turn are sent early once they add up to this many characters. */
const BATCH_LIMIT = 64 * 1024;

const hasSetImmediate = typeof setImmediate === 'function';

/** Runs `fn(arg)` at the end of this turn of the event loop, where the runtime has setImmediate (Node, Bun, Deno). */
export function atTurnEnd<T>(fn: (arg: T) => void, arg: T): void {
  if (hasSetImmediate) setImmediate(fn, arg);
  else setTimeout(fn, 0, arg);
}

function flushSink(sink: BatchingSseSink): void {
  sink.flush();
}

/**
 * An SSE response that writes at most once per turn of the event loop: what one turn writes (the
 * priming event and a quick answer; a run of notifications) leaves as one chunk when the turn ends,
 * or early once it reaches 64 KiB. Each chunk costs the runtime a write, a chunk header and a
 * syscall (Node) or a trip through the stream plumbing (web), so batching is where both bridges
 * save most. Subclasses say how a chunk reaches the peer and how much the peer has not taken.
 */
export abstract class BatchingSseSink implements SseSink {
  /** Frames written this turn, not yet handed to the runtime. */
  protected pending = '';
  private scheduled = false;

  /** Whether the stream has ended (by us or by the peer). */
  protected abstract get done(): boolean;
  /** Hands a chunk to the runtime (`chunk` may be empty: the first turn sends the headers). */
  protected abstract emit(chunk: string): void;
  /** Bytes the runtime holds that the peer has not taken. */
  protected abstract get held(): number;
  /** Whether the peer keeps up (a runtime that buffers says no). */
  protected abstract get keepingUp(): boolean;

  abstract end(): void;
  abstract onClose(listener: () => void): void;
  abstract onDrain(listener: () => void): void;

  write(chunk: string): boolean {
    if (this.done) return false;
    this.pending += chunk;
    if (this.pending.length >= BATCH_LIMIT) this.flush();
    else this.schedule();
    return this.keepingUp;
  }

  get bufferedBytes(): number {
    // Frames held for the end of the turn count: a client that stops reading is seen either way.
    return this.pending.length + this.held;
  }

  /** Sends what this turn wrote, now. */
  flush(): void {
    this.scheduled = false;
    const chunk = this.pending;
    this.pending = '';
    if (!this.done) this.emit(chunk);
  }

  protected schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    atTurnEnd(flushSink, this);
  }

  /** Takes what is batched, to send with the end of the stream. */
  protected takePending(): string {
    const chunk = this.pending;
    this.pending = '';
    return chunk;
  }
}
