/**
 * Randomized task lifecycles (the Tasks extension, SEP-2663) against every adapter, on the
 * fixture's task tools: results (slow_compute), tool errors (failing_job), protocol errors
 * (protocol_error_job), questions (confirm_delete, multi_input, answered with tasks/update, sometimes
 * partially, sometimes twice) and a question before the task (test_tool_with_task). Clients give up
 * at random (they stop polling, or close the create request's connection), poll again after the
 * end, cancel at random, and, where requests can carry a principal, probe other clients' tasks.
 *
 * When every lane is done, an audit reads every task again: each ends as its tool and its client
 * decided (the tool's exact result or error; `cancelled` after a cancel it did not beat; still
 * `input_required` only while a question is unanswered), none is stuck once its tool has ended, a
 * completed task is readable until its TTL, and no other principal can see it.
 *
 * express runs the SDK v1 fixture (questions are server requests), koa and next the SDK v2 one
 * (questions are input_required rounds). The in-process ones also read principals from a test
 * header (as an auth middleware would set them) and keep their tasks in an observed memory store:
 * the audit then sees tasks whose client never learned the id, awaits each task's end as an event,
 * and moves the store's clock to each task's TTL. `next start` runs in its own process: there the
 * audit polls, as a client would.
 *
 * Before the random lifecycles, each lane runs one whose choices are scripted (FORCED below), so
 * that every behaviour above happens in every run, whatever the seed draws.
 *
 * CI runs 50 lifecycles per adapter; `pnpm test:chaos` (LONG=1) runs 1,000. `SEED=` replays.
 */
import { createServer } from 'node:http';
import express from 'express';
import Koa from 'koa';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryTaskStore, type AuthInfo, type TaskChange, type TaskRecord, type TaskSignalListener, type TaskStore } from '@mcp-kit/core';
import { mcpExpress } from '@mcp-kit/express';
import { fixtureServer } from '@mcp-kit/fixtures';
import { mcpKoa } from '@mcp-kit/koa';
import {
  accepted,
  computed,
  CONFIRM_QUESTION,
  confirmQuestion,
  FAILING_JOB_TEXT,
  NAME_QUESTION,
  PROTOCOL_ERROR,
} from '../../packages/fixtures/src/tasks/spec.js';
import { handlerFor, listen, nextAdapter, type HarnessOptions, type ServerUnderTest } from '@mcp-kit/testbed/adapters';
import { envelope, modernRequest, routingHeaders } from '@mcp-kit/testbed/requests';
import { RawSse, send } from '@mcp-kit/testbed/raw-client';
import { count, LONG, Rng, seedFor } from '@mcp-kit/testbed/random';

const LIFECYCLES = count(50, 1_000, 'TASK_CHAOS_LIFECYCLES');
const LANES = LONG ? 25 : 10;
/** The server's retryMs: the poll interval it gives every task. */
const POLL_MS = 100;
/** Long enough to outlive the run: the audit moves the store's clock to reach it. */
const TTL_MS = 600_000;
/** A fixture tool ends within ~2 s of its start or its last answer; a task working past this is stuck. */
const SETTLE_MS = 15_000;
/** More polls than any lifecycle needs: a task still running then never ends. */
const MAX_POLLS = 400;

const TASKS = 'io.modelcontextprotocol/tasks';
const SERVER_INFO = 'io.modelcontextprotocol/serverInfo';
const PRINCIPAL_HEADER = 'x-test-principal';
const PRINCIPALS = ['alice', 'bob', 'carol', undefined] as const;
type Principal = (typeof PRINCIPALS)[number];
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

// --- servers under test --------------------------------------------------------------------------

/** A task store the audit can see into: every task created, each task's end as an event, a movable clock. */
class ObservedTaskStore implements TaskStore {
  /** Added to the real time the store reads (the audit moves it to the tasks' TTLs). */
  skewMs = 0;
  readonly inner = new MemoryTaskStore({ now: () => Date.now() + this.skewMs });
  /** Every task as created: its id, principal and creation time. */
  readonly created = new Map<string, TaskRecord>();
  private readonly waiting = new Map<string, Array<(task: TaskRecord) => void>>();

  create(task: TaskRecord): void {
    this.inner.create(task);
    this.created.set(task.taskId, { ...task });
  }
  get(taskId: string): TaskRecord | undefined {
    return this.inner.get(taskId);
  }
  update(taskId: string, change: TaskChange): boolean {
    const changed = this.inner.update(taskId, change);
    this.wake(taskId);
    return changed;
  }
  answer(taskId: string, responses: Record<string, unknown>): boolean {
    return this.inner.answer(taskId, responses);
  }
  cancel(taskId: string, reason: string): boolean {
    const known = this.inner.cancel(taskId, reason);
    this.wake(taskId);
    return known;
  }
  listen(instanceId: string, listener: TaskSignalListener): void {
    this.inner.listen(instanceId, listener);
  }
  sweep(now: number): void {
    this.inner.sweep(now);
  }

  /** The task once it is terminal; `undefined` if it is not within `ms`. */
  terminal(taskId: string, ms: number): Promise<TaskRecord | undefined> {
    const now = this.inner.get(taskId);
    if (now && TERMINAL.has(now.status)) return Promise.resolve(now);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(undefined), ms);
      const list = this.waiting.get(taskId) ?? [];
      list.push((task) => {
        clearTimeout(timer);
        resolve(task);
      });
      this.waiting.set(taskId, list);
    });
  }

  private wake(taskId: string): void {
    const task = this.inner.get(taskId);
    if (!task || !TERMINAL.has(task.status)) return;
    for (const resolve of this.waiting.get(taskId) ?? []) resolve(task);
    this.waiting.delete(taskId);
  }
}

/** What an auth middleware would set, from a test header: the principal a task belongs to. */
function authFrom(value: string | string[] | undefined): AuthInfo | undefined {
  return typeof value === 'string' ? { token: `token-${value}`, clientId: value, scopes: [] } : undefined;
}

/** The principal of a stored task (core keys it as clientId and sub). */
function principalOf(record: TaskRecord): Principal {
  return PRINCIPALS.find((p) => (p === undefined ? undefined : `${p}\u0000`) === record.principal);
}

interface Target {
  name: string;
  /** In process: principals from the test header, and the observed store. */
  inProcess: boolean;
  start(store?: ObservedTaskStore): Promise<ServerUnderTest>;
}

const options = (store?: ObservedTaskStore): HarnessOptions => ({
  retryMs: POLL_MS,
  taskTtlMs: TTL_MS,
  ...(store ? { taskStore: store } : {}),
});

const targets: Target[] = [
  {
    name: 'express (SDK v1 fixture)',
    inProcess: true,
    async start(store) {
      const errors: Error[] = [];
      const handler = handlerFor({ ...options(store), server: () => fixtureServer('v1') }, errors);
      const app = express();
      app.use('/mcp', function testAuth(req, _res, next) {
        (req as typeof req & { auth?: AuthInfo }).auth = authFrom(req.headers[PRINCIPAL_HEADER]);
        next();
      });
      app.use('/mcp', mcpExpress(handler));
      return listen(createServer(app), handler, '/mcp', errors);
    },
  },
  {
    name: 'koa (SDK v2 fixture)',
    inProcess: true,
    async start(store) {
      const errors: Error[] = [];
      const handler = handlerFor({ ...options(store), server: () => fixtureServer('v2') }, errors);
      const app = new Koa();
      app.use(async function testAuth(ctx, next) {
        ctx.state.auth = authFrom(ctx.get(PRINCIPAL_HEADER) || undefined);
        await next();
      });
      app.use(mcpKoa(handler, { path: '/mcp' }));
      return listen(createServer(app.callback()), handler, '/mcp', errors);
    },
  },
  {
    name: 'next (SDK v2 fixture)',
    inProcess: false,
    start: () => nextAdapter.start(options()),
  },
];

// --- a 2026 client -------------------------------------------------------------------------------

const CAPABILITIES = { elicitation: {}, sampling: {}, extensions: { [TASKS]: {} } };

/** A 2026-07-28 client of one principal, declaring the Tasks extension on every request. */
class TaskClient {
  private nextId = 1;
  constructor(
    readonly url: string,
    readonly principal: Principal,
  ) {}

  private request(method: string, params: Record<string, unknown>) {
    const body = modernRequest(this.nextId++, method, params, envelope({ 'io.modelcontextprotocol/clientCapabilities': CAPABILITIES }));
    const headers: Record<string, string> = routingHeaders(body);
    if (this.principal !== undefined) headers[PRINCIPAL_HEADER] = this.principal;
    return { body, headers, init: { method: 'POST', headers, body: JSON.stringify(body) } };
  }

  /** The answer's message (a JSON body, or the last frame of an SSE one), with the HTTP status. */
  async send(method: string, params: Record<string, unknown>): Promise<{ status: number; message: any }> {
    const { body, init } = this.request(method, params);
    const res = await send(this.url, init);
    const type = String(res.headers['content-type'] ?? '');
    const message = type.startsWith('text/event-stream')
      ? JSON.parse(
          res.text
            .split('\n')
            .filter((l) => l.startsWith('data: '))
            .at(-1)!
            .slice(6),
        )
      : JSON.parse(res.text);
    expect(res.status, `${method}: ${res.text}`).toBeLessThan(500);
    expect(res.headers['mcp-session-id'], 'a 2026 answer never carries a session').toBeUndefined();
    expect(message.id, `${method}: the id echoed`).toBe(body.id);
    return { status: res.status, message };
  }

  async result(method: string, params: Record<string, unknown>): Promise<any> {
    const { status, message } = await this.send(method, params);
    expect(message.error, `${method} ${JSON.stringify(params)}: ${JSON.stringify(message)}`).toBeUndefined();
    expect(status).toBe(200);
    return message.result;
  }

  call(name: string, args: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<any> {
    return this.result('tools/call', { name, arguments: args, ...extra });
  }
  get(taskId: string): Promise<any> {
    return this.result('tasks/get', { taskId });
  }

  /**
   * A request whose connection the client closes: right after sending it, or a moment later
   * (racing the answer). It never reads an answer.
   */
  async abandon(method: string, params: Record<string, unknown>, afterMs?: number): Promise<void> {
    const { init } = this.request(method, params);
    const signal = afterMs === undefined ? undefined : AbortSignal.timeout(afterMs);
    const stream = await RawSse.open(this.url, init, afterMs === undefined ? { abortBeforeResponse: true } : { signal });
    await stream.ended;
  }
}

// --- lifecycles ----------------------------------------------------------------------------------

type Tool = 'slow_compute' | 'failing_job' | 'protocol_error_job' | 'confirm_delete' | 'multi_input' | 'test_tool_with_task' | 'greet';

interface Lifecycle {
  index: number;
  tool: Tool;
  args: Record<string, unknown>;
  principal: Principal;
  /** The client closed the create request's connection: it never learned the task's id. */
  abandoned?: boolean;
  taskId?: string;
  /** The first answer per question (by its message): what the tool must have used. */
  answers: Map<string, unknown>;
  /** A cancel was acknowledged. */
  cancelled?: boolean;
  /** The cancel came while the task waited for answers the client had not sent: only `cancelled` is right. */
  cancelMustWin?: boolean;
  /** The client stopped polling before the end. */
  gaveUp?: boolean;
  /** The terminal state the client saw, if it saw one. */
  seen?: any;
}

interface Tally {
  lifecycles: number;
  tasks: number;
  notTasks: number;
  abandonedCreates: number;
  gaveUp: number;
  polls: number;
  repolls: number;
  cancels: number;
  /** Cancels of a task waiting for answers not sent: they must win. */
  cancelsWhileAsking: number;
  updates: number;
  partialUpdates: number;
  /** Updates whose connection was cut, then sent again. */
  updatesCut: number;
  duplicateAnswers: number;
  strayAnswers: number;
  foreignProbes: number;
}

/** The questions a tool asks, by message. */
function questionsOf(l: Lifecycle): string[] {
  if (l.tool === 'confirm_delete') return [confirmQuestion(l.args.filename as string).message];
  if (l.tool === 'multi_input') return [NAME_QUESTION.message, CONFIRM_QUESTION.message];
  return [];
}

/** An answer to a question: accepted with what it asks for, declined, or cancelled. */
function answerTo(message: string, rng: Rng, index: number): unknown {
  const action = rng.weighted([
    [7, 'accept'],
    [2, 'decline'],
    [1, 'cancel'],
  ] as const);
  if (action !== 'accept') return { action };
  return {
    action,
    content: message === NAME_QUESTION.message ? { name: `name-${index}-${rng.int(0, 999)}` } : { confirm: rng.chance(0.5) },
  };
}

type Outcome =
  | { status: 'completed'; result: Record<string, unknown> }
  | { status: 'failed'; error: unknown }
  | { status: 'input_required'; open: string[] };

const textResult = (text: string, isError = false): Record<string, unknown> => ({
  content: [{ type: 'text', text }],
  ...(isError ? { isError: true } : {}),
});

/** How the task ends when nobody cancels it: from the tool and the answers it got. */
function naturalOutcome(l: Lifecycle): Outcome {
  switch (l.tool) {
    case 'slow_compute':
      return { status: 'completed', result: textResult(computed(l.args.label as string, l.args.seconds as number)) };
    case 'failing_job':
      return { status: 'completed', result: textResult(FAILING_JOB_TEXT, true) };
    case 'protocol_error_job':
      return { status: 'failed', error: PROTOCOL_ERROR };
    case 'test_tool_with_task':
      return { status: 'completed', result: textResult(`Hello, ${l.args.name as string}! (computed in task)`) };
    case 'greet':
      throw new Error('greet is never a task');
  }
  const open = questionsOf(l).filter((q) => !l.answers.has(q));
  if (open.length > 0) return { status: 'input_required', open };
  if (l.tool === 'confirm_delete') {
    const file = l.args.filename as string;
    const yes = accepted(l.answers.get(questionsOf(l)[0]!))?.confirm === true;
    return { status: 'completed', result: textResult(yes ? `deleted '${file}'` : `kept '${file}'`) };
  }
  const name = accepted(l.answers.get(NAME_QUESTION.message))?.name;
  const confirmed = accepted(l.answers.get(CONFIRM_QUESTION.message))?.confirm === true;
  return { status: 'completed', result: textResult(`name=${JSON.stringify(name)} confirmed=${String(confirmed)}`) };
}

/** Checks a task as tasks/get shows it against an outcome (a result or error exactly the tool's). */
function expectOutcome(task: any, outcome: Outcome, where: string): void {
  expect(task.status, where).toBe(outcome.status);
  if (outcome.status === 'completed') {
    expect(task.result, where).toEqual({ ...outcome.result, resultType: 'complete', _meta: { [SERVER_INFO]: expect.any(Object) } });
    expect(task, where).not.toHaveProperty('error');
  } else if (outcome.status === 'failed') {
    expect(task.error, where).toEqual(outcome.error);
    expect(task, where).not.toHaveProperty('result');
  } else {
    const open = Object.values(task.inputRequests ?? {}).map((r: any) => r.params?.message);
    expect(open.sort(), where).toEqual([...outcome.open].sort());
  }
}

/** What every tasks/get must show, whatever the moment: the same task, its fields well formed, never back from an end. */
function expectConsistent(l: Lifecycle, task: any, previous: any, where: string): void {
  expect(task).toMatchObject({ resultType: 'complete', taskId: l.taskId, ttlMs: TTL_MS, pollIntervalMs: POLL_MS });
  expect(['working', 'input_required', 'completed', 'failed', 'cancelled'], where).toContain(task.status);
  if (previous) {
    expect(task.createdAt, where).toBe(previous.createdAt);
    expect(Date.parse(task.lastUpdatedAt), where).toBeGreaterThanOrEqual(Date.parse(previous.lastUpdatedAt));
    if (TERMINAL.has(previous.status)) expect(task, `${where}: a terminal task changed`).toEqual(previous);
  }
  if (task.status === 'input_required') {
    const asked = Object.values(task.inputRequests ?? {}) as any[];
    expect(asked.length, `${where}: input_required without a question`).toBeGreaterThan(0);
    for (const q of asked) expect(questionsOf(l), `${where}: a question the tool does not ask`).toContain(q.params?.message);
    for (const q of asked) expect(l.answers.has(q.params?.message), `${where}: an answered question is asked again`).toBe(false);
  } else {
    expect(task, where).not.toHaveProperty('inputRequests');
  }
  if (task.status === 'cancelled') expect(l.cancelled, `${where}: cancelled, but its client never cancelled it`).toBe(true);
  if (task.status === 'failed' && !l.cancelled) expect(l.tool, `${where}: failed`).toBe('protocol_error_job');
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function pickTool(rng: Rng, index: number, forced?: Tool): { tool: Tool; args: Record<string, unknown> } {
  const tool =
    forced ??
    rng.weighted<Tool>([
      [4, 'slow_compute'],
      [2, 'failing_job'],
      [2, 'protocol_error_job'],
      [4, 'confirm_delete'],
      [4, 'multi_input'],
      [1, 'test_tool_with_task'],
      [1, 'greet'],
    ]);
  const tag = `${index}-${rng.int(0, 1e6)}`;
  switch (tool) {
    case 'slow_compute':
      return { tool, args: { seconds: rng.int(1, 2), label: `chaos-${tag}` } };
    case 'confirm_delete':
      return { tool, args: { filename: `file-${tag}.txt` } };
    case 'test_tool_with_task':
    case 'greet':
      return { tool, args: { name: `client-${tag}` } };
    default:
      return { tool, args: {} };
  }
}

/** Another principal asks for, answers and cancels the task (some of these, or `all`): it must not exist for them. */
async function probeAsStranger(url: string, l: Lifecycle, rng: Rng, open: string[], tally: Tally, all = false): Promise<void> {
  const stranger = new TaskClient(url, rng.pick(PRINCIPALS.filter((p) => p !== l.principal)));
  const taskId = l.taskId!;
  const attempts: Array<[string, Record<string, unknown>]> = [
    ['tasks/get', { taskId }],
    // An answer that would change the result if it were taken.
    [
      'tasks/update',
      {
        taskId,
        inputResponses: Object.fromEntries(open.map((k) => [k, { action: 'accept', content: { confirm: true, name: 'intruder' } }])),
      },
    ],
    ['tasks/cancel', { taskId }],
  ];
  for (const [method, params] of attempts) {
    if (!all && !rng.chance(0.6)) continue;
    const { status, message } = await stranger.send(method, params);
    expect([status, message.error?.code], `${method} by ${String(stranger.principal)} of a task of ${String(l.principal)}`).toEqual([
      200, -32602,
    ]);
    tally.foreignProbes++;
  }
}

/** The choices of a scripted lifecycle; what it leaves out is drawn as in any other. */
interface Script {
  tool: Tool;
  /** How the create request ends. */
  cut?: 'none' | 'before-response' | 'racing';
  /** Cancel at the first poll that follows a question left unanswered (the cancel must win). */
  cancelWhileAsking?: boolean;
  /** Stop polling at this poll. */
  giveUpAtPoll?: number;
  /** Probe the task as another principal at every poll, every way (where requests carry principals). */
  probe?: boolean;
  /** How each round of questions is answered: none, only the first open one, or all of them. */
  answer?: {
    which: 'none' | 'first' | 'all';
    how?: 'plain' | 'cut-then-again' | 'beside-a-cancel';
    stray?: boolean;
    again?: boolean;
  };
}

/**
 * One scripted lifecycle per lane, run first: each behaviour the header lists, whatever the seed.
 * The test checks afterwards that each one happened.
 */
const FORCED: Script[] = [
  // A partial answer (two questions asked at once), its update cut and sent again, with a stray
  // answer, then the same answers again (ignored); the next round answers the rest.
  { tool: 'multi_input', cut: 'none', answer: { which: 'first', how: 'cut-then-again', stray: true, again: true } },
  // A question left open, then a cancel: it must win.
  { tool: 'confirm_delete', cut: 'none', cancelWhileAsking: true, answer: { which: 'none' } },
  // Answers and a cancel at once: either wins.
  { tool: 'confirm_delete', cut: 'none', answer: { which: 'all', how: 'beside-a-cancel' } },
  // Creates whose client closes the connection: before the answer, and racing it.
  { tool: 'slow_compute', cut: 'before-response' },
  { tool: 'failing_job', cut: 'racing' },
  // A client that gives up before its first poll; the task fails all the same.
  { tool: 'protocol_error_job', cut: 'none', giveUpAtPoll: 0 },
  // Not a task, and a question before the task; its task probed by strangers at every poll.
  { tool: 'greet', cut: 'none' },
  { tool: 'test_tool_with_task', cut: 'none', probe: true },
];

/** One client's task, from its creation to its end or to the client giving up. */
async function runLifecycle(url: string, principals: boolean, rng: Rng, index: number, tally: Tally, script?: Script): Promise<Lifecycle> {
  const { tool, args } = pickTool(rng, index, script?.tool);
  const l: Lifecycle = { index, tool, args, principal: principals ? rng.pick(PRINCIPALS) : undefined, answers: new Map() };
  const where = () => `lifecycle ${index} (${tool} ${JSON.stringify(args)}, principal ${String(l.principal)}, task ${l.taskId})`;
  const client = new TaskClient(url, l.principal);

  // Creating it; some clients close the connection and never hear back.
  const cut =
    script?.cut ??
    rng.weighted([
      [88, 'none'],
      [8, 'before-response'],
      [4, 'racing'],
    ] as const);
  if (cut !== 'none' && tool !== 'greet' && tool !== 'test_tool_with_task') {
    await client.abandon('tools/call', { name: tool, arguments: args }, cut === 'racing' ? rng.int(0, 20) : undefined);
    l.abandoned = true;
    tally.abandonedCreates++;
    return l;
  }
  let created = await client.call(tool, args);
  if (tool === 'greet') {
    expect(created, where()).toMatchObject({ resultType: 'complete', content: [{ type: 'text', text: `Hello, ${args.name as string}!` }] });
    tally.notTasks++;
    return l;
  }
  if (tool === 'test_tool_with_task') {
    // SEP-2322 on the create request: a question first (no task yet), then the call again with the answer.
    expect(created, where()).toMatchObject({
      resultType: 'input_required',
      inputRequests: { user_name: { method: 'elicitation/create' } },
    });
    expect(created, where()).not.toHaveProperty('taskId');
    const inputResponses = { user_name: { action: 'accept', content: { name: args.name } } };
    created = await client.call(tool, {}, { inputResponses });
  }
  expect(created, where()).toMatchObject({ resultType: 'task', status: 'working', ttlMs: TTL_MS, pollIntervalMs: POLL_MS });
  expect(created.taskId, where()).toMatch(/^[A-Za-z0-9_-]{22}$/);
  expect(created, where()).not.toHaveProperty('result');
  l.taskId = created.taskId;
  tally.tasks++;

  const cancelAtPoll = script ? undefined : rng.chance(0.25) ? rng.int(0, 5) : undefined;
  let previous: any;
  /** Answers sent since the last poll: a cancel right after them may lose to the tool. */
  let answeredSincePoll = false;
  for (let poll = 0; ; poll++) {
    if (poll >= MAX_POLLS) throw new Error(`${where()}: not over after ${MAX_POLLS} polls: ${JSON.stringify(previous)}`);
    if (script ? poll === script.giveUpAtPoll : rng.chance(0.03)) {
      l.gaveUp = true;
      tally.gaveUp++;
      return l;
    }
    if (principals && (script ? script.probe : rng.chance(0.1)))
      await probeAsStranger(url, l, rng, Object.keys(previous?.inputRequests ?? {}), tally, script?.probe);
    const asking = previous?.status === 'input_required' && !answeredSincePoll;
    if (poll === cancelAtPoll || (script?.cancelWhileAsking && asking)) {
      l.cancelled = true;
      l.cancelMustWin = asking;
      tally.cancels++;
      if (l.cancelMustWin) tally.cancelsWhileAsking++;
      expect(await client.result('tasks/cancel', { taskId: l.taskId }), where()).toEqual({ resultType: 'complete' });
    } else {
      // The poll interval the task gives, with jitter: clients are not in step.
      await pause(rng.int(0, 2 * POLL_MS));
    }
    const task = await client.get(l.taskId!);
    tally.polls++;
    expectConsistent(l, task, previous, `${where()} poll ${poll}`);
    if (l.cancelled) expect(TERMINAL.has(task.status), `${where()}: not terminal right after its cancel`).toBe(true);
    previous = task;
    answeredSincePoll = false;

    if (TERMINAL.has(task.status)) {
      l.seen = task;
      for (let again = rng.int(0, 3); again > 0; again--) {
        expect(await client.get(l.taskId!), `${where()}: a terminal task read again`).toEqual(task);
        tally.repolls++;
      }
      return l;
    }
    if (task.status !== 'input_required') continue;

    // Questions: answer some now (a partial update), the rest later, some twice, or none (give up later).
    const open = Object.entries(task.inputRequests as Record<string, { params: { message: string } }>);
    const which = script?.answer?.which;
    const now = which === 'none' ? [] : which === 'first' ? open.slice(0, 1) : which === 'all' ? open : open.filter(() => rng.chance(0.6));
    if (now.length === 0) continue;
    const responses: Record<string, unknown> = {};
    for (const [key, q] of now) responses[key] = answerTo(q.params.message, rng, index);
    if (script?.answer ? script.answer.stray : rng.chance(0.1)) {
      responses['no-such-question'] = { action: 'accept', content: { confirm: true } };
      tally.strayAnswers++;
    }
    const update = { taskId: l.taskId, inputResponses: responses };
    const how =
      script?.answer?.how ??
      rng.weighted([
        [85, 'plain'],
        [8, 'cut-then-again'],
        [7, 'beside-a-cancel'],
      ] as const);
    if (how === 'cut-then-again') {
      // Lost on the way, as far as the client knows: it sends the same answers again.
      await client.abandon('tasks/update', update);
      tally.updatesCut++;
    }
    if (how === 'beside-a-cancel') {
      // Answers and a cancel at once: either may win, and the task ends either way.
      l.cancelled = true;
      tally.cancels++;
      const acks = await Promise.all([client.result('tasks/update', update), client.result('tasks/cancel', { taskId: l.taskId })]);
      expect(acks, where()).toEqual([{ resultType: 'complete' }, { resultType: 'complete' }]);
    } else {
      expect(await client.result('tasks/update', update), where()).toEqual({ resultType: 'complete' });
    }
    tally.updates++;
    if (now.length < open.length) tally.partialUpdates++;
    for (const [key, q] of now) l.answers.set(q.params.message, responses[key]);
    answeredSincePoll = true;
    if (script?.answer ? script.answer.again : rng.chance(0.15)) {
      // The same questions answered again, differently: already answered, so ignored.
      const again = Object.fromEntries(now.map(([key, q]) => [key, answerTo(q.params.message, rng, index)]));
      expect(await client.result('tasks/update', { taskId: l.taskId, inputResponses: again }), where()).toEqual({ resultType: 'complete' });
      tally.duplicateAnswers++;
    }
  }
}

// --- the audit -----------------------------------------------------------------------------------

interface Audit {
  completed: number;
  failed: number;
  cancelled: number;
  cancelsThatLost: number;
  waiting: number;
  orphans: number;
  stuck: number;
  ttlChecked: number;
  strangersRefused: number;
}

/** The task once terminal, awaited as the store's event (in process) or polled (next); the last state if it does not end. */
async function settled(url: string, store: ObservedTaskStore | undefined, taskId: string, principal: Principal): Promise<any> {
  const owner = new TaskClient(url, principal);
  if (store) await store.terminal(taskId, SETTLE_MS);
  const deadline = Date.now() + (store ? 0 : SETTLE_MS);
  for (;;) {
    const task = await owner.get(taskId);
    if (TERMINAL.has(task.status) || Date.now() >= deadline) return task;
    await pause(task.pollIntervalMs);
  }
}

async function audit(url: string, lifecycles: Lifecycle[], store: ObservedTaskStore | undefined, rng: Rng): Promise<Audit> {
  const a: Audit = {
    completed: 0,
    failed: 0,
    cancelled: 0,
    cancelsThatLost: 0,
    waiting: 0,
    orphans: 0,
    stuck: 0,
    ttlChecked: 0,
    strangersRefused: 0,
  };
  const stuck: string[] = [];
  const ended = (status: string) => {
    if (status === 'completed') a.completed++;
    if (status === 'failed') a.failed++;
    if (status === 'cancelled') a.cancelled++;
  };
  const tasks = lifecycles.filter((l) => l.taskId !== undefined);
  await Promise.all(
    tasks.map(async (l) => {
      const where = `audit of lifecycle ${l.index} (${l.tool} ${JSON.stringify(l.args)}, principal ${String(l.principal)}, task ${l.taskId})`;
      const natural = naturalOutcome(l);
      // A task waiting for an answer nobody will send is not stuck; anything else must end.
      const task =
        natural.status === 'input_required' && !l.cancelled
          ? await new TaskClient(url, l.principal).get(l.taskId!)
          : await settled(url, store, l.taskId!, l.principal);
      if (task.status === 'working' || (task.status === 'input_required' && (l.cancelled || natural.status !== 'input_required'))) {
        a.stuck++;
        stuck.push(`${where}: ${JSON.stringify(task)}`);
        return;
      }
      if (l.seen) expect(task, `${where}: the end the client saw changed`).toEqual(l.seen);
      if (l.cancelled && task.status === 'cancelled') {
        expect(task.statusMessage, where).toBe('cancelled by the client');
      } else {
        if (l.cancelled) a.cancelsThatLost++;
        expect(l.cancelMustWin, `${where}: a cancel of a task waiting for answers did not win`).not.toBe(true);
        expectOutcome(task, natural, where);
      }
      if (task.status === 'input_required') a.waiting++;
      ended(task.status);
      if (!store) return;
      expect(principalOf(store.created.get(l.taskId!)!), where).toBe(l.principal);
      const stranger = new TaskClient(url, rng.pick(PRINCIPALS.filter((p) => p !== l.principal)));
      const { status, message } = await stranger.send('tasks/get', { taskId: l.taskId });
      expect([status, message.error?.code], `${where}: seen by ${String(stranger.principal)}`).toEqual([200, -32602]);
      a.strangersRefused++;
    }),
  );
  expect(stuck, `${stuck.length} tasks stuck after their tool ended`).toEqual([]);
  if (!store) return a;

  // Tasks whose clients closed the create request: they run on, unseen; they end like any other.
  const known = new Set(tasks.map((l) => l.taskId));
  const abandoned = lifecycles.filter((l) => l.abandoned);
  const possible = abandoned.map((l) => naturalOutcome(l));
  const orphans = [...store.created.values()].filter((r) => !known.has(r.taskId));
  a.orphans = orphans.length;
  expect(orphans.length, 'more unseen tasks than abandoned creates').toBeLessThanOrEqual(abandoned.length);
  await Promise.all(
    orphans.map(async (record) => {
      const principal = principalOf(record);
      expect(
        abandoned.some((l) => l.principal === principal),
        `an unseen task of ${String(principal)}`,
      ).toBe(true);
      const first = await new TaskClient(url, principal).get(record.taskId);
      // Nobody answers an unseen task's questions: it waits; anything else ends.
      const task = first.status === 'input_required' ? first : await settled(url, store, record.taskId, principal);
      const where = `unseen task ${record.taskId}: ${JSON.stringify(task)}`;
      if (task.status === 'working') {
        a.stuck++;
        stuck.push(where);
        return;
      }
      if (task.status === 'input_required') {
        a.waiting++;
        return;
      }
      ended(task.status);
      const matches = possible.some((o) => {
        try {
          expectOutcome(task, o, where);
          return true;
        } catch {
          return false;
        }
      });
      expect(matches, `${where}: not the end of any abandoned call`).toBe(true);
    }),
  );
  expect(stuck, `${stuck.length} tasks stuck after their tool ended`).toEqual([]);

  // Every task is readable until its TTL, and unknown from then on: the store's clock moves to each in turn.
  const byAge = [...store.created.values()].sort((x, y) => x.createdAt - y.createdAt);
  const lifecycleOf = new Map(tasks.map((l) => [l.taskId!, l]));
  for (const record of byAge) {
    const owner = new TaskClient(url, principalOf(record));
    store.skewMs = record.createdAt + TTL_MS - Date.now() - 1_000;
    const before = await owner.get(record.taskId);
    expect(before.taskId).toBe(record.taskId);
    const seen = lifecycleOf.get(record.taskId)?.seen;
    if (seen) expect(before, `task ${record.taskId} a second before its TTL`).toEqual(seen);
    store.skewMs = record.createdAt + TTL_MS - Date.now();
    const after = await owner.send('tasks/get', { taskId: record.taskId });
    expect([after.status, after.message.error?.code], `task ${record.taskId} at its TTL`).toEqual([200, -32602]);
    a.ttlChecked++;
  }
  return a;
}

// --- the test ------------------------------------------------------------------------------------

describe.each(targets)('tasks chaos: $name', (target) => {
  let sut: ServerUnderTest | undefined;
  afterEach(async () => {
    await sut?.close();
    sut = undefined;
  });

  it(
    `${LIFECYCLES} random task lifecycles: every end the tool's and its client's, none stuck, readable until its TTL, invisible to others`,
    async () => {
      const seed = seedFor(`tasks-chaos ${target.name}`);
      const store = target.inProcess ? new ObservedTaskStore() : undefined;
      sut = await target.start(store);
      const root = new Rng(seed);
      const auditRng = root.fork();
      const tally: Tally = {
        lifecycles: 0,
        tasks: 0,
        notTasks: 0,
        abandonedCreates: 0,
        gaveUp: 0,
        polls: 0,
        repolls: 0,
        cancels: 0,
        cancelsWhileAsking: 0,
        updates: 0,
        partialUpdates: 0,
        updatesCut: 0,
        duplicateAnswers: 0,
        strayAnswers: 0,
        foreignProbes: 0,
      };
      const lifecycles: Lifecycle[] = [];
      const started = performance.now();
      let next = 0;
      await Promise.all(
        Array.from({ length: LANES }, async (_, lane) => {
          const rng = root.fork();
          const script = FORCED[lane];
          if (script) lifecycles.push(await runLifecycle(sut!.url, target.inProcess, rng, -1 - lane, tally, script));
          while (next < LIFECYCLES) {
            const index = next++;
            lifecycles.push(await runLifecycle(sut!.url, target.inProcess, rng, index, tally));
            tally.lifecycles++;
          }
        }),
      );
      const ran = Math.round(performance.now() - started);
      const audited = await audit(sut.url, lifecycles, store, auditRng);
      console.log(
        `[tasks-chaos ${target.name}] ${JSON.stringify(tally)} in ${ran} ms; audit ${JSON.stringify(audited)} in ${Math.round(performance.now() - started) - ran} ms`,
      );

      expect(tally.lifecycles).toBe(LIFECYCLES);
      expect(audited.stuck).toBe(0);
      // The chaos really happened: every behaviour at least once (the scripted lifecycles make
      // sure of it, whatever the seed), and most lifecycles made a task.
      const happened = {
        abandonedCreates: tally.abandonedCreates,
        gaveUp: tally.gaveUp,
        cancelsWhileAsking: tally.cancelsWhileAsking,
        partialUpdates: tally.partialUpdates,
        updatesCut: tally.updatesCut,
        duplicateAnswers: tally.duplicateAnswers,
        strayAnswers: tally.strayAnswers,
        notTasks: tally.notTasks,
        ...(target.inProcess ? { foreignProbes: tally.foreignProbes } : {}),
        completed: audited.completed,
        failed: audited.failed,
        cancelled: audited.cancelled,
      };
      expect(Object.entries(happened).filter(([, n]) => n === 0)).toEqual([]);
      if (LIFECYCLES >= 50) expect(tally.tasks).toBeGreaterThan(LIFECYCLES / 2);
      expect(sut.errors).toEqual([]);
      if (sut.inProcess) expect(sut.inProcess.handler.sessionCount).toBe(0);
    },
    LONG ? 1_800_000 : 60_000,
  );
});
