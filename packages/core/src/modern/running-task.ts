import type { JSONRPCMessage, JSONRPCRequest, MessageExtraInfo, RequestId } from '../ports/mcp.js';
import type { InputRequest, TaskChange, TaskStore } from '../ports/task-store.js';
import type { ModernChannel, Reply } from './channel.js';
import { errorInResult, missingCapabilities, missingCapabilityError, stampResult } from './results.js';
import type { Handshake } from './server-pool.js';
import { asError } from '../util/errors.js';
import { triedWhile } from '../util/retry.js';

/** A tool's progress or log shows in `statusMessage`, written to the store at most this often. */
const MESSAGE_EVERY_MS = 100;

/** What a running task needs from the engine. */
export interface RunningTaskContext {
  store: TaskStore;
  channel: ModernChannel;
  handshake: Handshake;
  /** The capabilities the client declared when it created the task: its questions must fit them. */
  clientCapabilities: Record<string, unknown>;
  /** The tools/call that started the task, and its per-message extra, to call the tool again with answers. */
  request: JSONRPCRequest;
  extra: MessageExtraInfo;
  onError(error: Error): void;
  /**
   * The task reached a terminal state here: forget it. `finished` when the tool's own end was
   * written (a result its client will come to read), `stopped` when it was cancelled or shut down.
   */
  done(taskId: string, outcome: 'finished' | 'stopped'): void;
  /** A status the task took (for telemetry). */
  status(taskId: string, status: string): void;
  /**
   * A write the store refuses (Redis down, failing over) is tried again, once a second, for this
   * long: the task's TTL, past which nobody reads it (without one: until it is written). Shorter, an outage would lose a result its
   * client keeps polling for (invariant: stored-before-success).
   */
  storeWaitMs: number;
}

/**
 * A task whose tool runs on this instance: the channel's {@link Reply} for the tool's request once
 * the request became a task. What the tool sends turns into the task's state in the store: its
 * answer into `completed` (tool errors too) or `failed`; progress and logs into `statusMessage`;
 * a question into `input_required`. A question comes either as a request of the tool's server
 * (SDK v1 `elicitInput`, answered through the channel once the client answers) or as an
 * `input_required` result (SEP-2322; the tool is called again with the answers). Store writes go
 * out in order, after the task's creation.
 */
export class RunningTask implements Reply {
  /** The server's requests become the task's questions (`input_required`). */
  readonly asks = true;
  /** The server's id of the tool request running now (a new one per `input_required` round). */
  serverId = 0;
  private queue: Promise<unknown>;
  /** Questions the server asked as requests, by the key clients answer under: the server's id and the question. */
  private readonly asked = new Map<string, { id: RequestId; request: InputRequest }>();
  private askedSeq = 0;
  /** An `input_required` round: the state to echo and the answers gathered so far. */
  private round: { keys: Set<string>; requestState: unknown; answers: Record<string, unknown> } | undefined;
  private pendingMessage: string | undefined;
  private messageTimer: ReturnType<typeof setTimeout> | undefined;
  private finished = false;

  constructor(
    readonly taskId: string,
    created: Promise<unknown>,
    private readonly ctx: RunningTaskContext,
  ) {
    this.queue = created;
  }

  answer(message: JSONRPCMessage): void {
    if (this.finished) return;
    const { result, error } = message as { result?: Record<string, unknown>; error?: { code: number; message: string; data?: unknown } };
    if (error) return this.finish({ status: 'failed', error, statusMessage: error.message });
    const outcome = result ?? {};
    const failure = errorInResult(outcome);
    if (failure) return this.finish({ status: 'failed', error: failure, statusMessage: failure.message });
    stampResult('tools/call', outcome, this.ctx.handshake);
    if (outcome.resultType === 'input_required') return this.askRound(outcome);
    this.finish({ status: 'completed', result: outcome });
  }

  related(message: JSONRPCMessage): void {
    if (this.finished) return;
    if ('id' in message) return this.askAsRequest(message as JSONRPCRequest);
    const { method, params } = message as { method: string; params?: Record<string, unknown> };
    if (method === 'notifications/progress') {
      const p = params as { progress?: number; total?: number; message?: string };
      this.showMessage(p.message ?? (p.total ? `progress ${p.progress}/${p.total}` : `progress ${p.progress}`));
    } else if (method === 'notifications/message') {
      const data = (params as { data?: unknown }).data;
      this.showMessage(typeof data === 'string' ? data : JSON.stringify(data));
    }
  }

  /** A client answered questions (already taken off the record by the store). */
  answered(responses: Record<string, unknown>): void {
    for (const [key, response] of Object.entries(responses)) {
      const asked = this.asked.get(key);
      if (asked !== undefined) {
        this.asked.delete(key);
        this.ctx.channel.deliver({ jsonrpc: '2.0', id: asked.id, result: response as Record<string, unknown> });
      } else if (this.round?.keys.has(key)) {
        this.round.keys.delete(key);
        this.round.answers[key] = response;
      }
    }
    if (this.round && this.round.keys.size === 0) this.callAgain();
  }

  /** The task was cancelled (already `cancelled` in the store): stop the tool. */
  stop(reason: string): void {
    if (this.finished) return;
    this.finished = true;
    clearTimeout(this.messageTimer);
    this.ctx.channel.cancel(this.serverId, reason);
    this.ctx.done(this.taskId, 'stopped');
  }

  /** Ran past `maxCallDurationMs`: the tool is stopped and the task fails with `error`, which its client reads. */
  expire(error: { code: number; message: string; data?: unknown }): void {
    if (this.finished) return;
    this.ctx.channel.cancel(this.serverId, error.message);
    this.finish({ status: 'failed', error, statusMessage: error.message });
  }

  /** Calls the tool again with the answers of an `input_required` round (SEP-2322 inside a task). */
  private callAgain(): void {
    const { answers, requestState } = this.round!;
    this.round = undefined;
    const params = { ...this.ctx.request.params, inputResponses: answers, ...(requestState === undefined ? {} : { requestState }) };
    this.serverId = this.ctx.channel.request({ ...this.ctx.request, params }, this.ctx.extra, this);
  }

  private askRound(result: Record<string, unknown>): void {
    const inputRequests = (result.inputRequests ?? {}) as Record<string, InputRequest>;
    const missing = missingCapabilities(result, this.ctx.clientCapabilities);
    if (missing) return this.finish({ status: 'failed', error: missingCapabilityError(missing) });
    this.round = { keys: new Set(Object.keys(inputRequests)), requestState: result.requestState, answers: {} };
    this.write({ status: 'input_required', inputRequests });
  }

  private askAsRequest(request: JSONRPCRequest): void {
    const key = `input-${++this.askedSeq}`;
    const ask: InputRequest = { method: request.method, ...(request.params ? { params: request.params } : {}) };
    if (missingCapabilities({ resultType: 'input_required', inputRequests: { [key]: ask } }, this.ctx.clientCapabilities)) {
      this.ctx.channel.deliver({
        jsonrpc: '2.0',
        id: request.id,
        error: { code: -32021, message: `the client did not declare what ${request.method} needs` },
      });
      return;
    }
    this.asked.set(key, { id: request.id, request: ask });
    // Every question still open is listed, not only the new one (a task may ask several at once).
    const outstanding: Record<string, InputRequest> = {};
    for (const [k, open] of this.asked) outstanding[k] = open.request;
    this.write({ status: 'input_required', inputRequests: outstanding });
  }

  private showMessage(text: string): void {
    this.pendingMessage = text.length > 500 ? `${text.slice(0, 500)}…` : text;
    if (this.messageTimer) return;
    this.messageTimer = setTimeout(() => {
      this.messageTimer = undefined;
      if (!this.finished && this.pendingMessage !== undefined) this.write({ statusMessage: this.pendingMessage });
    }, MESSAGE_EVERY_MS);
    this.messageTimer.unref?.();
  }

  private finish(change: TaskChange): void {
    this.finished = true;
    clearTimeout(this.messageTimer);
    // The last report the tool made, not one the throttle held back.
    if (change.statusMessage === undefined && this.pendingMessage !== undefined) change.statusMessage = this.pendingMessage;
    this.write(change).then(() => this.ctx.done(this.taskId, 'finished'));
  }

  private write(change: TaskChange): Promise<unknown> {
    if (change.status !== undefined) this.ctx.status(this.taskId, change.status);
    const attempt = () => this.ctx.store.update(this.taskId, change);
    const until = Date.now() + this.ctx.storeWaitMs;
    this.queue = this.queue
      .then(() => triedWhile(attempt, () => Date.now() < until))
      .then((error) => {
        if (error !== undefined) this.ctx.onError(asError(error, `task store update of ${this.taskId} failed`));
      });
    return this.queue;
  }
}
