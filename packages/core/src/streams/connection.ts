import type { SseSink } from '../ports/http.js';
import type { CloseReason } from '../telemetry/events.js';
import { KEEP_ALIVE, retryField } from './frames.js';

/**
 * One live HTTP connection carrying a stream's events. A stream outlives its connections: when a
 * connection ends, events go on into the store, and the next `GET` + `Last-Event-ID` gets a new
 * connection.
 */
export class SseConnection {
  closed = false;
  /** Why it ended (see `CloseReason`); set when it closes. */
  closeReason: CloseReason | undefined;
  /** The retry hint it ended with, if the server ended it with one. */
  closeRetryMs: number | undefined;
  /**
   * The retry its stream goes at (its priming's: the call's last close retry). A server-side end
   * (drain, slow reader, duration) repeats it: an SDK v1 client keeps one retry for all its
   * streams, the last it read, so another value would set the pace of every call it polls.
   */
  pace: number | undefined;
  lastWrite: number;
  /** Frames up to this sequence number came with a replay; live copies of them are skipped. */
  private replayedThrough = 0;
  // Most connections get one listener (the session's): a slot, and an array only for more.
  private closeListener: (() => void) | undefined;
  private moreCloseListeners: Array<() => void> | undefined;
  /** A replay waiting for the sink to drain; closing wakes it too. */
  private wakeReplay: (() => void) | undefined;

  constructor(
    private readonly sink: SseSink,
    private readonly maxBufferedBytes: number,
    private readonly onOverflow: (conn: SseConnection) => void,
    now: number,
  ) {
    this.lastWrite = now;
    sink.onClose(() => this.markClosed());
  }

  /** Writes a frame; `seq` (of an event frame) lets a resumed connection skip what it replayed. */
  write(frame: string, seq = Infinity): void {
    if (this.closed || seq <= this.replayedThrough) return;
    this.sink.write(frame);
    this.lastWrite = Date.now();
    // A client that stops reading must not grow our memory: past the mark, hang up and let it
    // resume from the store (every frame was stored before it was written).
    if (this.sink.bufferedBytes > this.maxBufferedBytes) this.onOverflow(this);
  }

  /**
   * Writes replayed frames no faster than the client takes them: where a frame would push what the
   * connection holds past `maxBufferedBytes`, it waits for the sink to drain instead of hanging
   * up, so a backlog of any size comes back on one connection. Resolves when all are written or
   * the connection closed.
   */
  async replay(frames: readonly string[]): Promise<void> {
    const sink = this.sink;
    for (const frame of frames) {
      if (this.closed) return;
      if (sink.onDrain && sink.bufferedBytes > 0 && sink.bufferedBytes + frame.length > this.maxBufferedBytes) {
        await new Promise<void>((resolve) => {
          this.wakeReplay = resolve;
          sink.onDrain!(resolve);
        });
        this.wakeReplay = undefined;
        if (this.closed) return;
      }
      this.write(frame);
    }
  }

  /** Sends what the sink holds for the end of this turn now (the response head, the priming event). */
  sendNow(): void {
    if (!this.closed) this.sink.sendNow?.();
  }

  /** The replay delivered every frame up to `seq`: live copies of them are not written again. */
  skipThrough(seq: number): void {
    this.replayedThrough = seq;
  }

  keepAlive(now: number, idleMs: number): void {
    if (this.closed || now - this.lastWrite < idleMs) return;
    this.sink.write(KEEP_ALIVE);
    this.lastWrite = now;
  }

  /**
   * Ends the response; with `retryMs`, first tells the client when to come back. `reason` says why
   * (default: `server-close` with a retry hint, `complete` without).
   */
  end(retryMs?: number, reason?: CloseReason): void {
    if (this.closed) return;
    if (retryMs !== undefined) this.sink.write(retryField(retryMs));
    this.closeReason = reason ?? (retryMs === undefined ? 'complete' : 'server-close');
    this.closeRetryMs = retryMs;
    this.markClosed();
    this.sink.end();
  }

  onClose(listener: () => void): void {
    if (this.closed) listener();
    else if (this.closeListener === undefined) this.closeListener = listener;
    else (this.moreCloseListeners ??= []).push(listener);
  }

  private markClosed(): void {
    if (this.closed) return;
    this.closed = true;
    this.closeReason ??= 'client';
    this.wakeReplay?.();
    const first = this.closeListener;
    const more = this.moreCloseListeners;
    this.closeListener = undefined;
    this.moreCloseListeners = undefined;
    first?.();
    if (more) for (const l of more) l();
  }
}
