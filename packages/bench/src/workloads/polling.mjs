// Workload 5: SEP-1699 polling end to end, through the SDK client. `clients` sessions each call
// long_task with closeEvery, so the server hangs up every `closeEvery` steps and the client
// resumes with GET + Last-Event-ID after the retry hint. Counts the log events each client got
// (each step exactly once, in order) and the resumes it made. A client that hears nothing for
// `stallMs` gives up on its call (a lost answer would otherwise hold the run for the SDK's timeout).
import { performance } from 'node:perf_hooks';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

export async function polling(handle, { clients = 16, steps = 3_000, intervalMs = 1, closeEvery = 1, retryMs = 0, stallMs = 60_000 }) {
  const url = new URL(`${handle.origin}/mcp`);
  let reconnections = 0;
  const countingFetch = (input, init) => {
    const headers = new Headers(init?.headers);
    if ((init?.method ?? 'GET') === 'GET' && headers.has('last-event-id')) reconnections++;
    return fetch(input, init);
  };
  const sessions = [];
  for (let i = 0; i < clients; i++) {
    const client = new Client({ name: 'mcp-kit-bench', version: '0.0.0' });
    const seen = { steps: [], errors: [], lastEventAt: performance.now(), abort: new AbortController() };
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      seen.steps.push(n.params.data?.step);
      seen.lastEventAt = performance.now();
    });
    const transport = new StreamableHTTPClientTransport(url, {
      fetch: countingFetch,
      reconnectionOptions: {
        initialReconnectionDelay: retryMs,
        maxReconnectionDelay: 1_000,
        reconnectionDelayGrowFactor: 1,
        maxRetries: 5,
      },
    });
    transport.onerror = (error) => {
      if (!seen.done) seen.errors.push(String(error));
    };
    await client.connect(transport);
    sessions.push({ client, transport, seen });
  }
  const started = performance.now();
  for (const { seen } of sessions) seen.lastEventAt = started;
  const watchdog = setInterval(() => stalled(sessions, { stallMs, steps, counts: () => reconnections }), 250);
  let results;
  try {
    results = await Promise.all(
      sessions.map(({ client, seen }) =>
        client.callTool({ name: 'long_task', arguments: { steps, intervalMs, closeEvery, retryMs } }, undefined, {
          timeout: 600_000,
          signal: seen.abort.signal,
        }),
      ),
    );
  } finally {
    clearInterval(watchdog);
  }
  const seconds = (performance.now() - started) / 1000;
  for (const { seen } of sessions) seen.done = true;
  let events = 0;
  let exactlyOnceInOrder = true;
  for (const [i, { seen }] of sessions.entries()) {
    events += seen.steps.length;
    const ok = seen.steps.length === steps && seen.steps.every((s, k) => s === k + 1);
    const text = results[i]?.content?.[0]?.text;
    if (!ok || text !== `completed ${steps} steps`) exactlyOnceInOrder = false;
  }
  for (const { client } of sessions) await client.close().catch(() => {});
  return {
    clients,
    steps,
    intervalMs,
    closeEvery,
    seconds,
    events,
    eventsPerSec: events / seconds,
    reconnections,
    reconnectionsPerSec: reconnections / seconds,
    exactlyOnceInOrder,
    errors: sessions.flatMap((s) => s.seen.errors).slice(0, 5),
  };
}

/** Aborts the call of every client that has heard nothing for `stallMs`, saying where it stopped. */
function stalled(sessions, { stallMs, steps, counts }) {
  const now = performance.now();
  for (const { seen } of sessions) {
    if (seen.abort.signal.aborted || now - seen.lastEventAt < stallMs) continue;
    const last = seen.steps.at(-1) ?? 0;
    const detail = seen.errors.length > 0 ? `; transport errors: ${seen.errors.slice(-2).join(' | ')}` : '';
    seen.abort.abort(
      new Error(`stalled: no event for ${stallMs} ms after step ${last} of ${steps} (${counts()} reconnections in the run)${detail}`),
    );
  }
}
