/**
 * The SDK clients of the fault battery's outage scenarios (issue 27: "SDK v1 and v2 clients at
 * default settings plus raw chaos clients"), one shape for every SDK so a test audits them alike:
 * SDK v1 (`@modelcontextprotocol/sdk`, tests/cluster/clients.ts), SDK v2
 * (`@modelcontextprotocol/client`) in `legacy` version negotiation (a 2025 session) or the default
 * `auto` (which lands on 2026-07-28 and stays on its one response stream, with no session), and a
 * 2026-07-28 client with the Tasks extension's own requester (`@modelcontextprotocol/ext-tasks`).
 * Each runs at its SDK's default settings; the request timeout is passed explicitly, at the SDK's
 * own default ({@link CLIENT_TIMEOUT_MS}), so a test can tell a call left to it. The raw chaos
 * clients beside them are in tests/support/raw-chaos.ts.
 */
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { connectClient, type LongTask } from './clients.js';
import { stepOf } from './wire-log.js';
import { connectTaskSession } from './modern.js';
import type { ProxiedRequest } from './cluster.js';

/** The SDK's own default request timeout: a call still unanswered then was left to it. */
export const CLIENT_TIMEOUT_MS = 60_000;

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

/** Resolves once every client has heard at least `n` steps of its running call (a task client: once its call is a task). */
export async function stepsReached(list: OutageClient[], n: number, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const behind = () => list.filter((c) => (isTaskClient(c) ? !c.tasked : c.steps.length < n));
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
