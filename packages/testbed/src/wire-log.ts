/**
 * What the real-client suites share: which fixture servers the adapters serve (a factory and the
 * environment that picks it in the example apps, one row per SDK major), the long_task workloads,
 * and a fetch that records every exchange a TypeScript client makes, bodies included, so a test
 * can assert on what crossed the wire and not only on what the client chose to surface.
 */
import { FIXTURE_SDKS, fixtureServer } from '@mcp-kit/fixtures';
import type { Adapter, HarnessOptions, ServerUnderTest } from './adapters.js';

export const MODERN = '2026-07-28';
export const LEGACY = '2025-11-25';

/** A server the adapters can serve: in process through `server`, in `next start` through `env`. */
export interface Fixture {
  name: string;
  server: NonNullable<HarnessOptions['server']>;
  /** Environment for the example apps (DESIGN.md: `MCP_SDK=v1|v2` picks the fixture's SDK). */
  env: Record<string, string>;
}

/** The fixture on each SDK major, as the example apps pick it with MCP_SDK. */
export const fixtures: Fixture[] = FIXTURE_SDKS.map((sdk) => ({
  name: `sdk-${sdk} fixture`,
  server: () => fixtureServer(sdk),
  env: { MCP_SDK: sdk },
}));

/**
 * Starts `adapter` serving `fixture`. The Next adapter spawns `next start` with this process's
 * environment, so the fixture's env is set for the duration of the start (tests in one file start
 * their servers one after another) and restored after.
 */
export async function serve(adapter: Adapter, fixture: Fixture, options: HarnessOptions = {}): Promise<ServerUnderTest> {
  if (adapter.inProcess) return adapter.start({ ...options, server: fixture.server });
  const saved = Object.fromEntries(Object.keys(fixture.env).map((key) => [key, process.env[key]]));
  Object.assign(process.env, fixture.env);
  try {
    return await adapter.start(options);
  } finally {
    for (const [key, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[key];
      else process.env[key] = value;
    }
  }
}

export const SIMPLE_TEXT = 'This is a simple text response for testing.';

/**
 * 2025 era: closes after steps 4 and 8, 120 ms apart, each asking for a 20 ms reconnect, so the
 * client is back well before the next close (a close that finds no connection would merge two
 * reconnects into one; the bound below allows it on a very slow machine).
 */
export const POLLED_TASK = { steps: 12, intervalMs: 30, closeEvery: 4, retryMs: 20 };
export const POLLED_CLOSES = 2;

/** 2026 era: no resumption, the whole call on the request's own stream. */
export const STREAMED_TASK = { steps: 10, intervalMs: 5 };

/** `closeEvery` sent by a 2026 client: closeSSEStream must decline, the stream stays whole. */
export const UNCLOSABLE_TASK = { steps: 6, intervalMs: 5, closeEvery: 2, retryMs: 20 };

export const completed = (steps: number) => [{ type: 'text', text: `completed ${steps} steps` }];
export const oneTo = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

/** The `{ step }` of a long_task log notification's data, if it is one. */
export function stepOf(data: unknown): number | undefined {
  const step = (data as { step?: unknown } | null)?.step;
  return typeof step === 'number' ? step : undefined;
}

export interface Exchange {
  method: string;
  headers: Headers;
  /** The JSON-RPC message posted, if any. */
  body?: any;
  status?: number;
  contentType?: string;
  /** The response body as received so far (SSE text or JSON). */
  text: string;
}

/** Everything a client sent and received through {@link WireLog.fetch}. */
export class WireLog {
  readonly exchanges: Exchange[] = [];

  readonly fetch: typeof fetch = async (input, init) => {
    const body = typeof init?.body === 'string' ? JSON.parse(init.body) : undefined;
    const exchange: Exchange = { method: init?.method ?? 'GET', headers: new Headers(init?.headers), body, text: '' };
    this.exchanges.push(exchange);
    const response = await fetch(input, init);
    exchange.status = response.status;
    exchange.contentType = response.headers.get('content-type') ?? undefined;
    if (!response.body) return response;
    const decoder = new TextDecoder();
    const copy = new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        exchange.text += decoder.decode(chunk, { stream: true });
        controller.enqueue(chunk);
      },
    });
    return new Response(response.body.pipeThrough(copy), {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };

  /** Posted JSON-RPC requests with this method. */
  posted(method: string): Exchange[] {
    return this.exchanges.filter((e) => e.method === 'POST' && e.body?.method === method);
  }

  /** GETs carrying Last-Event-ID: the client coming back for a stream the server closed. */
  get resumes(): Exchange[] {
    return this.exchanges.filter((e) => e.method === 'GET' && e.headers.has('last-event-id'));
  }

  /** Every JSON-RPC message the server sent, on any response, in arrival order per response. */
  received(): any[] {
    return this.exchanges.flatMap((e) => messagesIn(e));
  }

  /** Responses (result or error) for request `id`, across every stream. */
  responsesTo(id: unknown): any[] {
    return this.received().filter((m) => m.id === id && ('result' in m || 'error' in m));
  }
}

function messagesIn(exchange: Exchange): any[] {
  if (!exchange.text) return [];
  if (!exchange.contentType?.startsWith('text/event-stream')) {
    const parsed = JSON.parse(exchange.text);
    return Array.isArray(parsed) ? parsed : [parsed];
  }
  // Only complete events (ended by a blank line) count, as for an EventSource.
  const events = exchange.text.replace(/\r\n?/g, '\n').split('\n\n').slice(0, -1);
  return events.flatMap((event) => {
    const data = event
      .split('\n')
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(5).replace(/^ /, ''))
      .join('\n');
    return data ? [JSON.parse(data)] : [];
  });
}
