import type { ServerResponse } from 'node:http';
import type { CoreResponder, OutHeaders, SseSink } from '../../ports/http.js';
import { BatchingSseSink } from '../sse-writer.js';

/** Writes the core's answers to a `node:http` response. */
export class NodeResponder implements CoreResponder {
  constructor(private readonly res: ServerResponse) {}

  send(status: number, headers: OutHeaders, body: string | undefined): void {
    const res = this.res;
    if (res.headersSent) {
      res.end();
      return;
    }
    res.writeHead(status, headers);
    res.end(body);
  }

  onClose(listener: () => void): void {
    const res = this.res;
    if (res.closed || res.destroyed) listener();
    else res.once('close', listener);
  }

  acknowledge(): void {
    this.res.writeProcessing();
    // node:http may hold the bytes until the next tick: the peer must have them before anything runs.
    this.res.socket?.uncork();
  }

  stream(headers: OutHeaders): SseSink {
    this.res.writeHead(200, headers);
    // Small SSE frames should leave now, not wait for Nagle.
    this.res.socket?.setNoDelay(true);
    return new NodeSseSink(this.res);
  }
}

/** One SSE response on `node:http`: a chunk per turn through `res.write`, backpressure from `res`. */
class NodeSseSink extends BatchingSseSink {
  private started = false;
  // A local flag, not res.writableEnded/destroyed: Express swaps the prototype of every res, which
  // makes each property read on it slow, and write() runs once per frame. (SseConnection stops
  // writing when res closes; emit() checks res once per turn.)
  private ended = false;
  /** Compression middleware buffers unless asked to flush. */
  private readonly flushable: boolean;
  /**
   * False once `res.writableLength` was seen at 0 after our last write: only our own writes add
   * to it, so it stays 0 until the next one and the per-frame checks need not read it (each read
   * is a chain of getters, slow on Express's `res`). Compression writes later than we do, so with
   * it we always read.
   */
  private queued = true;

  constructor(private readonly res: ServerResponse) {
    super();
    this.flushable = typeof (res as ServerResponse & { flush?: unknown }).flush === 'function';
    // The headers go out at the end of this turn even when nothing is written in it.
    this.schedule();
  }

  protected get done(): boolean {
    return this.ended;
  }

  protected get held(): number {
    return this.nodeBuffered() ? this.res.writableLength : 0;
  }

  protected get keepingUp(): boolean {
    return !this.nodeBuffered() || !this.res.writableNeedDrain;
  }

  protected emit(chunk: string): void {
    const res = this.res;
    if (res.writableEnded || res.destroyed) return;
    if (chunk === '') {
      // (`headersSent` is already true after writeHead: it says rendered, not sent.)
      if (!this.started) {
        res.flushHeaders();
        this.queued = true;
      }
      this.started = true;
      return;
    }
    this.started = true;
    res.write(chunk);
    this.queued = true;
    if (this.flushable) (res as ServerResponse & { flush(): void }).flush();
  }

  /**
   * Sends what this turn wrote, and the head, to the socket now: node:http corks the socket on
   * each write until the next tick, so without the uncork the bytes would wait for it.
   */
  sendNow(): void {
    this.flush();
    this.res.socket?.uncork();
  }

  end(): void {
    this.ended = true;
    const res = this.res;
    const chunk = this.takePending();
    if (chunk !== '' && !res.writableEnded && !res.destroyed) res.end(chunk);
    else res.end();
  }

  onClose(listener: () => void): void {
    const res = this.res;
    // A client that left before the stream opened has already fired 'close'.
    if (res.closed || res.destroyed) listener();
    else res.once('close', listener);
  }

  onDrain(listener: () => void): void {
    // What waits for the end of the turn goes to the socket now, so 'drain' can follow it.
    if (this.pending !== '') this.flush();
    if (this.res.writableNeedDrain) this.res.once('drain', listener);
    else setImmediate(listener);
  }

  /** Whether node:http may hold bytes of ours that the socket has not taken. */
  private nodeBuffered(): boolean {
    if (this.queued && !this.flushable && this.res.writableLength === 0) this.queued = false;
    return this.queued;
  }
}
