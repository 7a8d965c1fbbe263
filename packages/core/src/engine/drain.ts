import { ErrorCode, reject, type Rejection } from '../http/errors.js';
import type { ResolvedOptions } from '../options.js';
import { Arrivals, type Arrival } from '../session/arrivals.js';
import type { SessionRegistry } from '../session/registry.js';
import type { ClusterPort } from './cluster-port.js';

/**
 * What the drain reads of the engine's context (`EngineContext`, which owns the drain), named by
 * its shape so that the context does not import itself back.
 */
interface Drained {
  readonly options: ResolvedOptions;
  readonly registry: SessionRegistry;
  readonly cluster: ClusterPort | undefined;
  /** The 2026 servers: their requests in flight. */
  readonly modern: { readonly inFlight: number };
  /** The Tasks extension: tasks running here, results their clients have yet to read. */
  readonly tasks: { readonly running: number; readExpectedUntil(now: number): number | undefined } | undefined;
  /** The 2026 listen streams. */
  readonly listeners: { close(): void };
}

/** What a request that a draining instance will not serve hears (alone, or with no peer to hand it to). */
export function turnedAway(ctx: { readonly options: { readonly retryMs: number } }): Rejection {
  const retryAfter = String(Math.max(1, Math.ceil(ctx.options.retryMs / 1000)));
  return reject(503, ErrorCode.ServerError, 'Service Unavailable: this server instance is shutting down; retry', {
    'retry-after': retryAfter,
  });
}

/**
 * This instance's drain, and the close after it, in one place: whether it began, what it waits
 * for, and when it is over. What runs here is counted where it starts and ends: a request on its
 * way to its session holds an {@link Arrival} until it is done (`withSession`); a session, a 2026
 * request and a task tell the drain when they settle (`check`). The drain looks again only then,
 * or when an answer a client was expected to fetch is overdue, or at the deadline; it never polls.
 */
export class Drain {
  /** Requests on their way to their session: while one is, no session is handed off (it may be the one it found). */
  private readonly arrivals = new Arrivals(() => this.check());
  private done: Promise<void> | undefined;
  private closeBegan = false;
  private left = false;
  /** Wakes the drain while it waits; `undefined` while it does not. */
  private wake: (() => void) | undefined;

  /** `McpHandler.drain` was called: new work goes to other instances, or is refused (see {@link turnedAway}). */
  get started(): boolean {
    return this.done !== undefined;
  }

  /** `McpHandler.close` began: nothing new starts that the shutdown would have to wait for. */
  get closing(): boolean {
    return this.closeBegan;
  }

  /**
   * Whether a request is refused at the door: the handler closes, unless a drain still hands
   * requests over to peers (until close() has left the cluster: then nothing can be handed over).
   */
  get refusesAll(): boolean {
    return this.closeBegan && (!this.started || this.left);
  }

  /** A request on its way to its session: counted until released (in a `finally`). */
  arrive(): Arrival {
    return this.arrivals.arrive();
  }

  /** Something the drain waits for may have ended (a call, a request, a task, an answer fetched): it looks again. */
  check(): void {
    this.wake?.();
  }

  /** Starts the drain once; every later call gets the same promise. */
  start(ctx: Drained, deadlineMs: number): Promise<void> {
    this.done ??= this.run(ctx, Date.now() + deadlineMs);
    return this.done;
  }

  /** close() began. */
  close(): void {
    this.closeBegan = true;
  }

  /** close() has left the cluster. */
  leftCluster(): void {
    this.left = true;
  }

  /**
   * The instance stops taking work and lets its sessions go to other instances (see
   * docs/scaling-out.md). Clients that poll are sent away at once (their connections end with the
   * retry hint; they resume on another instance, which follows the calls still running here from
   * the shared store); idle sessions are handed off as soon as they are idle; at the deadline
   * whatever is left is handed off too (a call still running is lost, and its client hears so
   * from the session's next owner). Without a cluster, new sessions are refused and the drain waits
   * until every call is answered and every answer fetched by its client (or the deadline);
   * `tasks/*` are still served, and a task's result in the in-process store is waited for until read.
   */
  private async run(ctx: Drained, deadline: number): Promise<void> {
    const { registry, options } = ctx;
    const handsOff = ctx.cluster?.handsOff ?? false;
    registry.watchSettled(() => this.check());
    // With peers, polling clients resume there at once. Alone, this instance is where they come
    // back: their calls' answers, even those written while they were away, are theirs to fetch here.
    if (handsOff) for (const session of registry.sessions.values()) session.routes.endPolling(options.retryMs);
    for (;;) {
      // Not while a request is on its way to its session: the session it found may look idle yet.
      if (handsOff && !this.arrivals.any) {
        await Promise.all(registry.idleSessions().map((session) => registry.letGo(session, options.retryMs)));
      }
      const now = Date.now();
      const busyUntil = this.running(ctx, handsOff, now);
      if (busyUntil === undefined || now >= deadline) break;
      await this.changed(Math.min(deadline, busyUntil));
    }
    // What is left: idle sessions without a cluster (they end as at close), or calls past the deadline.
    const left = [...registry.sessions.values()];
    if (handsOff) await Promise.all(left.map((session) => registry.letGo(session, options.retryMs)));
    else for (const session of left) session.terminate(options.retryMs, 'shutdown');
    // What still flows through here for other instances (a followed resume, a relayed stream, a
    // listen stream) ends with the retry hint: its client comes back through a peer.
    ctx.listeners.close();
    for (const conn of [...registry.live]) conn.end(conn.pace ?? options.retryMs, 'shutdown');
    ctx.cluster?.endRelayed(options.retryMs);
  }

  /**
   * What still runs here: a request on its way to its session, a session's call (or, alone, an
   * answer its client has yet to fetch), a 2026 request, a task (or, with the in-process task
   * store, a result its client has yet to read). `undefined` when nothing does; else until when the
   * drain may wait without a signal (the first answer or result whose client is overdue then).
   */
  private running(ctx: Drained, handsOff: boolean, now: number): number | undefined {
    const { registry, tasks } = ctx;
    let until = Infinity;
    let running = this.arrivals.any || ctx.modern.inFlight > 0 || (tasks?.running ?? 0) > 0;
    const readBy = tasks?.readExpectedUntil(now);
    if (readBy !== undefined) until = Math.min(until, readBy);
    for (const session of registry.sessions.values()) {
      if (!session.idle) running = true;
      // Alone, an answer written while its client was away is this instance's to hand out.
      const fetchBy = handsOff ? undefined : session.routes.awaitedUntil(now);
      if (fetchBy !== undefined) until = Math.min(until, fetchBy);
    }
    return running || until < Infinity ? until : undefined;
  }

  /** Resolves at the next signal, or at `until` (ms since the epoch) without one. */
  private changed(until: number): Promise<void> {
    return new Promise((resolve) => {
      const woken = () => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve();
      };
      // setTimeout takes at most 2^31 - 1 ms: a longer deadline is waited for in steps.
      const timer = setTimeout(woken, Math.min(2 ** 31 - 1, Math.max(0, until - Date.now())));
      this.wake = woken;
    });
  }
}
