/**
 * Raw chaos clients for the fault battery: beside the SDK clients, each opens a session
 * over raw HTTP and runs `long_task` calls with `closeEvery`, cutting its own connections at random
 * byte offsets and resuming with the last event id it saw, through whatever the scenario breaks.
 * Each client's first connections are cut until one cut lands, whatever its seed draws.
 * A 502/503 (the documented answers of a store or an instance that failed) is waited out and the
 * same request sent again, as a client honouring `Retry-After` would; everything else is recorded
 * for the audit: each call ends with its result or a JSON-RPC error the server sent, its steps
 * arrive once and in order, every event id follows the one before, and no status but 200, 202,
 * 204, 502 and 503 is seen (a 404 would be a live session lost, a 500 a failure nobody handled).
 */
import { expect } from 'vitest';
import { RawSession, splitId, type RawSse } from '@mcp-kit/testbed/raw-client';
import { callTool } from '@mcp-kit/testbed/requests';
import type { LongTask } from '@mcp-kit/testbed/long-task';
import { CLIENT_TIMEOUT_MS } from '@mcp-kit/testbed/clients';
import { Rng } from '@mcp-kit/testbed/random';

export interface RawCallOutcome {
  client: string;
  call: number;
  steps: number[];
  /** The result's text, when the call completed. */
  result?: string;
  /** The JSON-RPC error the server answered the call with, when it did not. */
  error?: { code: number; message: string };
  /** Why the client gave up on the call without an answer (a defect the audit reports). */
  stuck?: string;
}

export interface RawChaosTally {
  connections: number;
  cuts: number;
  serverCloses: number;
  /** 502/503 answers the client waited out and sent again. */
  retried: number;
  /** Every status the client saw, by code. */
  statuses: Map<number, number>;
}

export interface RawChaosOptions {
  calls: number;
  seed: number;
  steps: number;
  intervalMs: number;
  closeEvery?: number;
  retryMs?: number;
  /** A call with no answer after this long is stuck. */
  callDeadlineMs?: number;
}

/** The cursor an event id stands for: a resume sent back to come later gets it marked with a count (`<cursor>~n`). */
const cursorOf = (id: string): string => id.replace(/~\d+$/, '');

/** A 502/503 is retried after this pause (or the server's `Retry-After`, capped to it). */
const RETRY_PAUSE_MS = 100;

export class RawChaosClient {
  readonly outcomes: RawCallOutcome[] = [];
  readonly tally: RawChaosTally = { connections: 0, cuts: 0, serverCloses: 0, retried: 0, statuses: new Map() };
  private constructor(
    readonly name: string,
    readonly session: RawSession,
  ) {}

  static async open(url: string, name: string): Promise<RawChaosClient> {
    for (let attempt = 0; ; attempt++) {
      try {
        return new RawChaosClient(name, await RawSession.open(url));
      } catch (error) {
        // An initialize can meet the same failures as any request; a client tries again.
        if (attempt >= 20 || !/initialize: 50[23]/.test(String(error))) throw error;
        await new Promise((resolve) => setTimeout(resolve, RETRY_PAUSE_MS));
      }
    }
  }

  get sessionId(): string {
    return this.session.sessionId;
  }

  /** Runs the calls one after the other, with idle gaps between them. */
  async run(options: RawChaosOptions): Promise<void> {
    const rng = new Rng(options.seed);
    for (let call = 1; call <= options.calls; call++) {
      await new Promise((resolve) => setTimeout(resolve, rng.int(20, 200)));
      this.outcomes.push(await this.call(call, rng, options));
    }
  }

  private count(status: number): void {
    this.tally.statuses.set(status, (this.tally.statuses.get(status) ?? 0) + 1);
  }

  private async call(call: number, rng: Rng, o: RawChaosOptions): Promise<RawCallOutcome> {
    const outcome: RawCallOutcome = { client: this.name, call, steps: [] };
    const args = { steps: o.steps, intervalMs: o.intervalMs, closeEvery: o.closeEvery, retryMs: o.retryMs };
    const deadline = Date.now() + (o.callDeadlineMs ?? 30_000);
    let requestId = call;
    let cursor: string | undefined;
    let token: string | undefined;
    for (;;) {
      if (Date.now() > deadline) {
        outcome.stuck = `no answer after ${o.callDeadlineMs ?? 30_000} ms (last event ${cursor ?? 'none'})`;
        return outcome;
      }
      // Cut a third of the connections somewhere past the priming event (~50 bytes): a call whose
      // POST is cut before its first event id cannot be resumed, and is not what this client tests.
      // Until one cut has landed, every connection is cut inside its first event (which ends past
      // byte 190), so that no seed leaves a client uncut.
      const cut =
        this.tally.cuts === 0 ? { abortAtByte: rng.int(80, 190) } : rng.chance(0.33) ? { abortAtByte: rng.int(80, o.steps * 120) } : {};
      this.tally.connections++;
      let stream: RawSse;
      try {
        stream =
          cursor === undefined
            ? await this.session.postSse(callTool(requestId, 'long_task', args), cut)
            : await this.session.get(cursor, cut);
      } catch {
        // The connection failed before an answer (an instance killed or paused under the proxy).
        await new Promise((resolve) => setTimeout(resolve, RETRY_PAUSE_MS));
        continue;
      }
      const how = await stream.end(Math.max(1, deadline - Date.now())).catch(() => {
        stream.abort();
        return 'hung' as const;
      });
      this.count(stream.status);
      if (stream.status === 502 || stream.status === 503) {
        this.tally.retried++;
        await new Promise((resolve) => setTimeout(resolve, RETRY_PAUSE_MS));
        continue;
      }
      if (stream.status === 204) {
        // Nothing left of a finished stream: only right if the answer was already heard.
        outcome.stuck = `204 for a stream whose answer it never heard (last event ${cursor})`;
        return outcome;
      }
      if (stream.status !== 200) {
        const body = stream.raw;
        try {
          outcome.error = JSON.parse(body).error;
        } catch {
          // not JSON: the audit reports the status
        }
        outcome.stuck = `status ${stream.status}: ${body.slice(0, 200)}`;
        return outcome;
      }
      if (how === 'aborted') this.tally.cuts++;
      for (const block of stream.blocks) {
        if (block.data === undefined || block.data === '') {
          if (block.id !== undefined) {
            // A priming event: a new stream's first cursor, the one a resume was sent with, or that
            // cursor marked with a count (`~n`): the server sends the client back to come later.
            const primed = splitId(cursorOf(block.id));
            if (token === undefined) token = primed.token;
            else expect(cursorOf(block.id), `${this.name} call ${call}: resumed stream primed with another cursor`).toBe(cursorOf(cursor!));
            cursor = block.id;
          }
          continue;
        }
        const message = JSON.parse(block.data) as {
          id?: number;
          method?: string;
          params?: { data?: { step?: number } };
          result?: { content: Array<{ text: string }> };
          error?: { code: number; message: string };
        };
        if (block.id !== undefined) {
          const { token: t, seq } = splitId(block.id);
          expect(t, `${this.name} call ${call}: an event of another stream`).toBe(token);
          // Only an error answering the call may follow a gap: the server ending a call whose
          // events the store lost (it says so), never a replay with frames missing.
          const lostAnswer = message.id === requestId && message.error !== undefined;
          const before = splitId(cursorOf(cursor!)).seq;
          if (!lostAnswer || seq <= before)
            expect(seq, `${this.name} call ${call}: event ${block.id} after ${cursor}: a gap or a repeat`).toBe(before + 1);
          cursor = block.id;
        }
        if (message.method === 'notifications/message' && typeof message.params?.data?.step === 'number') {
          outcome.steps.push(message.params.data.step);
        } else if (message.id === requestId) {
          if (message.result) outcome.result = message.result.content[0]!.text;
          else outcome.error = message.error;
          return outcome;
        }
      }
      if (how === 'server') this.tally.serverCloses++;
      // The server let go (closeSSEStream) or the client cut: come back after the hint.
      const retry = [...stream.blocks].reverse().find((b) => b.retry !== undefined)?.retry;
      if (cursor === undefined) {
        // No event id and no answer: the call cannot be resumed. It is sent again under a new id
        // (the old one may still run, or be answered on a stream nobody reads).
        requestId += 1_000_000;
        await new Promise((resolve) => setTimeout(resolve, RETRY_PAUSE_MS));
        continue;
      }
      if (how === 'server' && retry !== undefined) await new Promise((resolve) => setTimeout(resolve, Math.min(retry, 1_000)));
    }
  }

  async close(): Promise<void> {
    await this.session.del().catch(() => {});
  }
}

/**
 * The audit of raw chaos clients: every call ended with its result (every step once, in order) or,
 * for a client `mayEndEarly` allows, with an error the server sent (a prefix of the steps, no gap);
 * none stuck; no status outside the documented ones.
 */
export function auditRawChaos(clients: RawChaosClient[], steps: number, mayEndEarly: (client: string) => boolean = () => true): void {
  const outcomes = clients.flatMap((c) => c.outcomes);
  expect(outcomes.filter((o) => o.stuck).map((o) => `${o.client} call ${o.call}: ${o.stuck}`)).toEqual([]);
  for (const o of outcomes) {
    const where = `${o.client} call ${o.call}`;
    if (o.result === undefined) expect(mayEndEarly(o.client), `${where} ended with ${JSON.stringify(o.error)}`).toBe(true);
    if (o.result !== undefined) {
      expect(o.result, where).toBe(`completed ${steps} steps`);
      expect(o.steps, where).toEqual(Array.from({ length: steps }, (_, i) => i + 1));
    } else {
      expect(o.error, `${where}: neither a result nor an error`).toBeDefined();
      expect(o.steps, `${where}: ${o.error?.message}`).toEqual(Array.from({ length: o.steps.length }, (_, i) => i + 1));
    }
  }
  // Each client that heard an event cut a connection (its first cuts are forced to land).
  for (const c of clients)
    if (c.outcomes.some((o) => o.steps.length > 0)) expect(c.tally.cuts, `${c.name}: connections it cut`).toBeGreaterThan(0);
  const statuses = new Set(clients.flatMap((c) => [...c.tally.statuses.keys()]));
  expect([...statuses].filter((s) => ![200, 202, 204, 502, 503].includes(s))).toEqual([]);
}

/** One line of figures for the test's log. */
export function describeRawChaos(clients: RawChaosClient[]): string {
  const outcomes = clients.flatMap((c) => c.outcomes);
  const sum = (f: (t: RawChaosTally) => number) => clients.reduce((a, c) => a + f(c.tally), 0);
  const statuses = new Map<number, number>();
  for (const c of clients) for (const [s, n] of c.tally.statuses) statuses.set(s, (statuses.get(s) ?? 0) + n);
  return (
    `${clients.length} raw chaos clients, ${outcomes.length} calls: ${outcomes.filter((o) => o.result).length} completed, ` +
    `${outcomes.filter((o) => o.error && !o.result).length} ended with an error; ${sum((t) => t.connections)} connections, ` +
    `${sum((t) => t.cuts)} cut by the client, ${sum((t) => t.serverCloses)} closed by the server, ${sum((t) => t.retried)} 502/503 retried; ` +
    `statuses ${[...statuses].map(([s, n]) => `${s}×${n}`).join(' ')}`
  );
}

/** A raw chaos client's session takes another (short) call: resolves with the result's content. */
export async function rawCallAgain(c: RawChaosClient, task: LongTask = { steps: 3, intervalMs: 10 }): Promise<unknown> {
  const id = `again-${c.name}`;
  const stream = await c.session.postSse(callTool(id, 'long_task', { ...task }));
  await stream.end(CLIENT_TIMEOUT_MS);
  const answer = stream.messages.find((m) => m.message?.id === id)?.message;
  if (answer?.result === undefined) throw new Error(`${c.name}: status ${stream.status}, ${stream.raw.slice(0, 300)}`);
  return answer.result.content;
}
