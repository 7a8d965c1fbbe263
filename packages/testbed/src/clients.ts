/**
 * SDK v1 clients (`Client` + `StreamableHTTPClientTransport`) for the cluster tests: each keeps
 * the `long_task` steps it hears per call, so a test can check every step arrived once, in order.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, LoggingMessageNotificationSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { Agent, fetch as undiciFetch } from 'undici';
import { answerServerRequests } from './answers.js';

export interface LongTask {
  steps: number;
  intervalMs: number;
  closeEvery?: number;
  retryMs?: number;
}

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
        timeout: options.timeoutMs ?? 60_000,
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
    const data = n.params.data as { step?: unknown } | undefined;
    if (typeof data?.step === 'number') self.steps.push(data.step);
  });
  answerServerRequests(client, name);
  await client.connect(transport);
  self.sessionId = transport.sessionId as string;
  return self;
}

/** `1..n`, what a `long_task` of `n` steps must log. */
export const oneTo = (n: number): number[] => Array.from({ length: n }, (_, i) => i + 1);

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

/** Resolves once every client has heard at least `n` steps of its running `long_task`. */
export async function stepsReached(list: ClusterClient[], n: number, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (list.some((c) => c.steps.length < n)) {
    if (Date.now() > deadline) throw new Error(`steps heard: ${list.map((c) => c.steps.length).join(', ')}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
