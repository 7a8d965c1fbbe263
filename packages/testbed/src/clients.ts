/**
 * The SDK clients the suites, demos and benchmarks drive, every kind in one place: an SDK v1
 * client that records the `long_task` steps it hears ({@link connectClient}); the same and SDK v2
 * clients (2025 session or 2026-07-28) in one shape, so a test audits every kind alike
 * ({@link OutageClient}); and a 2026-07-28 client with the Tasks extension's own requester
 * (`@modelcontextprotocol/ext-tasks`, {@link connectTaskSession}). Each runs at its SDK's default
 * settings; the request timeout is passed explicitly, at the SDK's own default
 * ({@link CLIENT_TIMEOUT_MS}), so a test can tell a call left to it.
 */
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { createTaskSessionFromClient } from '@modelcontextprotocol/ext-tasks/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  LoggingMessageNotificationSchema,
  type CallToolResult,
} from '@modelcontextprotocol/sdk/types.js';
import { Agent, fetch as undiciFetch } from 'undici';
import type { ProxiedRequest } from './cluster.js';
import { modernAnswer } from './fetch-client.js';
import { stepOf, type LongTask } from './long-task.js';
import { MODERN, routingHeaders } from './requests.js';

/** The SDK's own default request timeout: a call still unanswered then was left to it. */
export const CLIENT_TIMEOUT_MS = 60_000;

// ---- SDK v1, recording what it hears ------------------------------------------------------------

export interface ClusterClient {
  name: string;
  client: Client;
  transport: StreamableHTTPClientTransport;
  /** The session id it got at `initialize`; a client that had to start over would have another. */
  sessionId: string;
  /** Steps logged by `long_task` since the last {@link callLongTask} began. */
  steps: number[];
  /** Every log notification's data, in arrival order, over the client's life. */
  logs: unknown[];
  /** Transport errors the SDK reported (dropped streams it then resumed, among others). */
  errors: Error[];
  callLongTask(task: LongTask, options?: { onprogress?: (progress: number) => void; timeoutMs?: number }): Promise<CallToolResult>;
  close(): Promise<void>;
}

/**
 * Connects a client that declares sampling and elicitation and answers both (sampling echoes the
 * prompt; elicitation accepts as `name`), so a restored session can be asked whether its server
 * still knows the client's capabilities.
 */
export async function connectClient(url: string, name: string): Promise<ClusterClient> {
  const client = new Client({ name, version: '1.0.0' }, { capabilities: { sampling: {}, elicitation: {} } });
  // A connection pool of its own, as a client in its own process has. With one pool for every
  // client of this process, a burst of calls (all of them at once, at the start of a test) needs a
  // new connection each, and a process accepts one connection per event-loop iteration (libuv
  // since 1.45): the proxy in this busy process took up to a minute to accept the last of 200, and
  // those first calls passed the SDK's request timeout (rolling-restart, shared, in CI under load).
  // Its own pool keeps the connections a client opened while connecting and reuses them.
  const pool = new Agent({ keepAliveTimeout: 30_000 });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    fetch: (input, init) => undiciFetch(input as string, { ...(init as object), dispatcher: pool }) as unknown as Promise<Response>,
  });
  const errors: Error[] = [];
  client.onerror = (e) => errors.push(e);
  const logs: unknown[] = [];
  const self: ClusterClient = {
    name,
    client,
    transport,
    sessionId: '',
    steps: [],
    logs,
    errors,
    async callLongTask(task, options = {}) {
      self.steps = [];
      const result = await client.callTool({ name: 'long_task', arguments: { ...task } }, CallToolResultSchema, {
        timeout: options.timeoutMs ?? CLIENT_TIMEOUT_MS,
        ...(options.onprogress ? { onprogress: (p: { progress: number }) => options.onprogress!(p.progress) } : {}),
      });
      return result as CallToolResult;
    },
    async close() {
      await client.close().catch(() => {});
      await pool.destroy().catch(() => {});
    },
  };
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    logs.push(n.params.data);
    const step = stepOf(n.params.data);
    if (step !== undefined) self.steps.push(step);
  });
  answerServerRequests(client, name);
  await client.connect(transport);
  self.sessionId = transport.sessionId as string;
  return self;
}

/** A count a test can await: `reach(n)` resolves once it is at least `n`. */
export class Counter {
  value = 0;
  private waiters: Array<{ target: number; resolve: () => void }> = [];

  add(n = 1): void {
    this.value += n;
    this.waiters = this.waiters.filter((w) => (this.value >= w.target ? (w.resolve(), false) : true));
  }

  reach(target: number): Promise<void> {
    if (this.value >= target) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ target, resolve }));
  }
}

/** Sampling echoes the prompt (`echo: <text>`); elicitation accepts as `name` (`<name>@example.com`). */
export function answerServerRequests(client: Client, name = 'ada'): void {
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => ({
    model: 'test-model',
    role: 'assistant',
    content: { type: 'text', text: `echo: ${(req.params.messages[0]!.content as { text: string }).text}` },
  }));
  client.setRequestHandler(ElicitRequestSchema, async () => ({
    action: 'accept',
    content: { username: name, email: `${name}@example.com` },
  }));
}

// ---- every SDK in one shape ------------------------------------------------------------------

/** One client of an outage, whichever SDK: the steps its running call heard, and the call. */
export interface OutageClient {
  name: string;
  /** Its session; none for a 2026-07-28 client (each request carries everything in itself). */
  sessionId: string | undefined;
  steps: number[];
  /** Calls long_task and resolves with the result's content. */
  call(task: LongTask): Promise<unknown>;
  close(): Promise<void>;
}

/** An SDK v1 client ({@link connectClient}) in the shape every SDK has here. */
export async function sdkV1(url: string, name: string): Promise<OutageClient> {
  const c = await connectClient(url, name);
  return {
    name,
    sessionId: c.sessionId,
    get steps() {
      return c.steps;
    },
    call: (task) => c.callLongTask(task, { timeoutMs: CLIENT_TIMEOUT_MS }).then((r) => r.content),
    close: () => c.close(),
  };
}

/** An SDK v2 client (`@modelcontextprotocol/client`) negotiating as `mode` says: `legacy` (a 2025 session) or `auto` (2026-07-28). */
export async function sdkV2(url: string, name: string, mode: 'legacy' | 'auto'): Promise<OutageClient> {
  const client = new ClientV2({ name, version: '1.0.0' }, { versionNegotiation: { mode } });
  const transport = new TransportV2(new URL(url));
  let steps: number[] = [];
  client.setNotificationHandler('notifications/message', (n) => {
    const step = stepOf(n.params.data);
    if (step !== undefined) steps.push(step);
  });
  await client.connect(transport);
  return {
    name,
    sessionId: transport.sessionId,
    get steps() {
      return steps;
    },
    async call(task) {
      steps = [];
      // 2026-07-28 sends log notifications only at the level a request asks for.
      const _meta = { 'io.modelcontextprotocol/logLevel': 'info' };
      const result = await client.callTool({ name: 'long_task', arguments: { ...task }, _meta }, { timeout: CLIENT_TIMEOUT_MS });
      return result.content;
    },
    close: () => client.close().catch(() => {}),
  };
}

/**
 * A 2026-07-28 client with the Tasks extension's own requester (`@modelcontextprotocol/ext-tasks`):
 * long_task becomes a task at its first close, which the package polls with `tasks/get` at the
 * interval the server asks for. It hears no log notifications, only the task's statusMessage: its
 * `steps` are the steps that statusMessage named, and `tasked` says its call is a task by now.
 */
export async function extTasks(url: string, name: string): Promise<OutageClient & { tasked: boolean }> {
  const { client, session } = await connectTaskSession(url, {
    clientInfo: { name, version: '1.0.0' },
    idPrefix: name,
    onInputRequest: async () => ({}),
  });
  const c = {
    name,
    sessionId: undefined,
    steps: [] as number[],
    tasked: false,
    async call(task: LongTask) {
      c.steps = [];
      c.tasked = false;
      const execution = await session.callTool('long_task', { ...task }, { metadata: { 'io.modelcontextprotocol/logLevel': 'info' } });
      c.tasked = execution.kind === 'task';
      const { outcome } = await execution.settle({
        onEvent: (event) => {
          const step = event.type === 'task' && event.task.statusMessage ? stepOf(JSON.parse(event.task.statusMessage)) : undefined;
          if (step !== undefined && step !== c.steps.at(-1)) c.steps.push(step);
        },
      });
      if (outcome.status !== 'completed')
        throw new Error(`task ${outcome.status}: ${outcome.status === 'failed' ? outcome.error.message : ''}`);
      return (outcome.result as { content: unknown }).content;
    },
    close: async () => {
      await session.close().catch(() => {});
      await client.close().catch(() => {});
    },
  };
  return c;
}

export const isTaskClient = (c: OutageClient): c is OutageClient & { tasked: boolean } => 'tasked' in c;

/** The SDK kinds, as {@link connectOutageClients} names them. */
export type OutageKind = 'v1' | 'v2-legacy' | 'v2-auto' | 'tasks';

/**
 * Connects `counts[kind]` clients of each kind, one after the other and the kinds interleaved
 * (`v1-0`, `v2-legacy-0`, `v2-auto-0`, `tasks-0`, `v1-1`, …), so each kind meets the same moments;
 * each joins `clients` as soon as it is connected (a test's afterEach closes those, should a later one fail).
 */
export async function connectOutageClients(
  url: string,
  counts: Partial<Record<OutageKind, number>>,
  clients: OutageClient[] = [],
): Promise<OutageClient[]> {
  const connect: Record<OutageKind, (name: string) => Promise<OutageClient>> = {
    v1: (name) => sdkV1(url, name),
    'v2-legacy': (name) => sdkV2(url, name, 'legacy'),
    'v2-auto': (name) => sdkV2(url, name, 'auto'),
    tasks: (name) => extTasks(url, name),
  };
  const kinds = Object.keys(connect) as OutageKind[];
  for (let i = 0; i < Math.max(...kinds.map((k) => counts[k] ?? 0)); i++) {
    for (const kind of kinds) if (i < (counts[kind] ?? 0)) clients.push(await connect[kind](`${kind}-${i}`));
  }
  return clients;
}

/**
 * Resolves once every client has heard at least `n` steps of its running `long_task` (a client of
 * the Tasks extension: once its call is a task, which hears no steps but through the task).
 */
export async function stepsReached(
  list: ReadonlyArray<{ name: string; steps: number[]; tasked?: boolean }>,
  n: number,
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const behind = () => list.filter((c) => (c.tasked !== undefined ? !c.tasked : c.steps.length < n));
  while (behind().length > 0) {
    if (Date.now() > deadline) throw new Error(`steps heard: ${list.map((c) => `${c.name} ${c.steps.length}`).join(', ')}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A client's requests as the proxy logged them, for a failure's message (a 2026-07-28 client has no session to follow them by). */
export function timelineOf(requests: ProxiedRequest[], c: OutageClient): string {
  if (c.sessionId === undefined) return '(no session: its requests are not told apart in the proxy log)';
  return requests
    .filter((q) => q.sessionId === c.sessionId)
    .map((q) => `${q.method} ${q.kind} ${q.lastEventId?.slice(-8) ?? ''} → ${q.status} ${q.servedBy ?? ''}`)
    .join('; ');
}

// ---- 2026-07-28 with the Tasks extension ------------------------------------------------------

/**
 * The `rawDispatch` that `@modelcontextprotocol/ext-tasks` calls for the requests it makes itself
 * (`tasks/get`, `tasks/update`, `tasks/cancel`): a 2026 POST with the routing headers (and the
 * package's own context headers, e.g. `Mcp-Name`), ids `<prefix>-1`, `<prefix>-2`… `onAnswer` sees
 * each request with when it was sent and its answer.
 */
export function rawTaskDispatch(
  url: string,
  prefix: string,
  onAnswer?: (request: { method: string }, startedAt: number, answer: any) => void,
) {
  let id = 0;
  return async (request: any, options: { signal?: AbortSignal; context?: { headers?: Record<string, string> } } = {}) => {
    const body = { jsonrpc: '2.0', id: `${prefix}-${++id}`, ...request };
    const extra = Object.entries(options.context?.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]);
    const startedAt = Date.now();
    const response = await fetch(url, {
      method: 'POST',
      headers: { ...routingHeaders(body), ...Object.fromEntries(extra) },
      body: JSON.stringify(body),
      signal: options.signal,
    });
    const { answer } = await modernAnswer(response);
    onAnswer?.(request, startedAt, answer);
    return answer.error ? { kind: 'error' as const, error: answer.error } : { kind: 'result' as const, result: answer.result };
  };
}

/**
 * An SDK v2 client pinned to 2026-07-28 with an `@modelcontextprotocol/ext-tasks` session over it
 * (declaring elicitation): the package's own requests go through {@link rawTaskDispatch}, and
 * `onInputRequest` answers what a task asks.
 */
export async function connectTaskSession(
  url: string,
  options: {
    clientInfo: { name: string; version: string };
    idPrefix: string;
    onAnswer?: Parameters<typeof rawTaskDispatch>[2];
    onInputRequest: (request: any) => Promise<unknown>;
  },
) {
  const { clientInfo } = options;
  const client = new ClientV2(clientInfo, { versionNegotiation: { mode: { pin: MODERN } } });
  await client.connect(new TransportV2(new URL(url)));
  const session = createTaskSessionFromClient(client, {
    endpointId: url,
    rawDispatch: rawTaskDispatch(url, options.idPrefix, options.onAnswer),
    v2RequestFraming: { protocolVersion: MODERN, clientInfo, clientCapabilities: { elicitation: {} } },
    onInputRequest: async (request) => (await options.onInputRequest(request)) as never,
  });
  return { client, session };
}
