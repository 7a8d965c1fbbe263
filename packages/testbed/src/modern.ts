/** Raw requests of the 2026-07-28 era: the `_meta` envelope in the body, the routing headers beside it. */
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createTaskSessionFromClient } from '@modelcontextprotocol/ext-tasks/client';
import { SseStream } from './sse.js';

export const MODERN = '2026-07-28';

export interface Envelope {
  'io.modelcontextprotocol/protocolVersion'?: unknown;
  'io.modelcontextprotocol/clientCapabilities'?: unknown;
  'io.modelcontextprotocol/clientInfo'?: unknown;
  'io.modelcontextprotocol/logLevel'?: unknown;
  [key: string]: unknown;
}

export function envelope(extra: Envelope = {}): Envelope {
  return {
    'io.modelcontextprotocol/protocolVersion': MODERN,
    'io.modelcontextprotocol/clientCapabilities': {},
    'io.modelcontextprotocol/clientInfo': { name: 'modern-wire-test', version: '1.0.0' },
    ...extra,
  };
}

/** A request of the 2026 era: the envelope merged into `params._meta`. */
export function modernRequest(id: number | string, method: string, params: Record<string, unknown> = {}, meta: Envelope = envelope()) {
  const { _meta, ...rest } = params as { _meta?: Record<string, unknown> };
  return { jsonrpc: '2.0', id, method, params: { ...rest, _meta: { ...meta, ...(_meta ?? {}) } } };
}

/** The routing headers a 2026 client sends for a body (SEP-2243). */
export function routingHeaders(body: { method: string; params?: Record<string, unknown> }): Record<string, string> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': MODERN,
    'mcp-method': body.method,
  };
  const p = body.params ?? {};
  const name = body.method === 'resources/read' ? p.uri : body.method.startsWith('tasks/') ? p.taskId : p.name;
  if (['tools/call', 'prompts/get', 'resources/read', 'tasks/get', 'tasks/update', 'tasks/cancel'].includes(body.method))
    headers['mcp-name'] = String(name);
  return headers;
}

/** POSTs a 2026 request; `headers` override the routing headers (`undefined` removes one). */
export async function modernPost(
  url: string,
  body: { method: string; params?: Record<string, unknown> } | string,
  headers: Record<string, string | undefined> = {},
): Promise<Response> {
  const base = typeof body === 'string' ? {} : routingHeaders(body);
  const merged: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...base, ...headers })) if (v !== undefined) merged[k] = v;
  return fetch(url, { method: 'POST', headers: merged, body: typeof body === 'string' ? body : JSON.stringify(body) });
}

/** The answer to a 2026 request: one JSON body, or an SSE stream whose data frames end with it. */
export async function modernAnswer(
  response: Response,
): Promise<{ status: number; json: boolean; messages: any[]; answer: any; raw: string }> {
  const type = response.headers.get('content-type') ?? '';
  if (type.startsWith('application/json')) {
    const answer = await response.json();
    return { status: response.status, json: true, messages: [answer], answer, raw: JSON.stringify(answer) };
  }
  if (!type.startsWith('text/event-stream')) throw new Error(`unexpected ${response.status} ${type}: ${await response.text()}`);
  const stream = new SseStream(response, new AbortController());
  await stream.ended_();
  const messages = stream.blocks.filter((b) => b.data).map((b) => JSON.parse(b.data!));
  return { status: response.status, json: false, messages, answer: messages.at(-1), raw: stream.raw };
}

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
  const client = new Client(clientInfo, { versionNegotiation: { mode: { pin: MODERN } } });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  const session = createTaskSessionFromClient(client, {
    endpointId: url,
    rawDispatch: rawTaskDispatch(url, options.idPrefix, options.onAnswer),
    v2RequestFraming: { protocolVersion: MODERN, clientInfo, clientCapabilities: { elicitation: {} } },
    onInputRequest: async (request) => (await options.onInputRequest(request)) as never,
  });
  return { client, session };
}
