import type { JSONRPCMessage, RequestId } from '../ports/mcp.js';
import { errorBody, sendRejection, type Rejection } from '../http/errors.js';
import type { CoreResponder } from '../ports/http.js';
import { SseConnection } from '../streams/connection.js';
import { JSON_HEADERS, messageEvent, SSE_HEADERS } from '../streams/frames.js';
import type { Reply } from './channel.js';
import { LOG_LEVELS, type Envelope, type LogLevel } from './envelope.js';
import { errorInResult, httpStatusOf, missingCapabilities, missingCapabilityError, recodeError, stampResult } from './results.js';
import type { Handshake } from './server-pool.js';

/** What an exchange needs besides its request. */
export interface ExchangeContext {
  res: CoreResponder;
  /** The live connections of the handler, for keep-alives and shutdown. */
  live: Set<SseConnection>;
  maxBufferedBytes: number;
  handshake: Handshake;
  /** The server's request id for this exchange, once it went in; the client left: cancel it. */
  cancel(reason: string): void;
  /** `resources/read`: the URI asked for (a not-found error names it, SEP-2164). */
  uri?: string;
}

/**
 * One 2026-era request and its answer. The answer is one JSON body when the server sends nothing
 * before it; the first notification the server sends about the request (progress, a log the
 * client asked for) turns the response into an SSE stream instead, which ends with the answer.
 * Frames carry no ids and there is no priming: a broken 2026 stream is not resumed, it cancels.
 */
export class Exchange implements Reply {
  private conn: SseConnection | undefined;
  private done = false;

  constructor(
    /** The client's id for the request, restored on the answer. */
    readonly clientId: RequestId,
    readonly method: string,
    private readonly envelope: Envelope,
    private readonly ctx: ExchangeContext,
  ) {}

  answer(message: JSONRPCMessage): void {
    if (this.done) return;
    this.done = true;
    const out = message as { id: RequestId; result?: Record<string, unknown>; error?: { code: number; message: string } };
    out.id = this.clientId;
    if (out.result) {
      stampResult(this.method, out.result, this.ctx.handshake);
      const missing = missingCapabilities(out.result, this.envelope.clientCapabilities);
      // SEP-2322: an input request the client cannot answer is not sent; the client hears why.
      const error = missing ? missingCapabilityError(missing) : errorInResult(out.result);
      if (error) {
        delete out.result;
        out.error = error;
      }
    } else if (out.error) {
      recodeError(out.error);
      const error = out.error as { code: number; data?: unknown };
      if (this.ctx.uri !== undefined && error.code === -32602 && error.data === undefined) error.data = { uri: this.ctx.uri };
    }
    const json = JSON.stringify(out);
    if (this.conn) {
      this.conn.write(messageEvent(undefined, json));
      this.conn.end();
      return;
    }
    this.ctx.res.send(out.error ? httpStatusOf(out.error.code) : 200, JSON_HEADERS, json);
  }

  /** Not answered yet, nor turned into a task. */
  get pending(): boolean {
    return !this.done;
  }

  /**
   * The request becomes a task: from now on the tool's messages go to the task, and the client's
   * leaving no longer cancels anything. `false` if the request was already answered.
   */
  becomeTask(): boolean {
    if (this.done) return false;
    this.done = true;
    return true;
  }

  /** Answers a request that became a task with the task's handle (a `CreateTaskResult`). */
  answerWithTask(result: Record<string, unknown>): void {
    const json = JSON.stringify({ jsonrpc: '2.0', id: this.clientId, result });
    if (this.conn) {
      this.conn.write(messageEvent(undefined, json));
      this.conn.end();
    } else this.ctx.res.send(200, JSON_HEADERS, json);
  }

  /**
   * Answers with a refusal of mcp-kit's own (the task store could not create the task): its status
   * and headers (a 503 with Retry-After: invariant come-back-later) while nothing was sent yet, else its
   * JSON-RPC error as the stream's last event.
   */
  refuse(rejection: Rejection): void {
    this.done = true;
    if (!this.conn) return sendRejection(this.ctx.res, rejection, this.clientId);
    this.conn.write(messageEvent(undefined, errorBody(rejection.code, rejection.message, this.clientId, rejection.data)));
    this.conn.end();
  }

  /** The client went away before the answer (a JSON response not yet sent): the request is cancelled. */
  clientLeft(): void {
    if (this.done) return;
    this.done = true;
    this.ctx.cancel('the client went away');
  }

  related(message: JSONRPCMessage): void {
    if (this.done) return;
    // The channel refuses the server's requests (see ModernChannel.send); only notifications get here.
    if ('id' in message) return;
    const method = (message as { method: string }).method;
    if (method === 'notifications/message' && !this.wantsLog((message as { params?: { level?: LogLevel } }).params?.level)) return;
    this.stream().write(messageEvent(undefined, JSON.stringify(message)));
  }

  /** Whether the client asked for logs at this level (an envelope without `logLevel` asked for none). */
  private wantsLog(level: LogLevel | undefined): boolean {
    const wanted = this.envelope.logLevel;
    if (wanted === undefined || level === undefined) return false;
    return LOG_LEVELS.indexOf(level) >= LOG_LEVELS.indexOf(wanted);
  }

  /** Upgrades the response to SSE on the first notification; a client that leaves cancels the request. */
  private stream(): SseConnection {
    if (this.conn) return this.conn;
    const { res, live, maxBufferedBytes } = this.ctx;
    // A reader too slow for `maxBufferedBytes` is cut off; the revision says a cut stream cancels.
    const conn = new SseConnection(res.stream(SSE_HEADERS), maxBufferedBytes, (c) => c.end(), Date.now());
    live.add(conn);
    conn.onClose(() => {
      live.delete(conn);
      if (!this.done) {
        this.done = true;
        this.ctx.cancel('the client closed the response stream');
      }
    });
    return (this.conn = conn);
  }
}
