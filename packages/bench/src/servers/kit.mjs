// What the three mcp-kit servers share: the handler with the bench surface and a store filler.
import { createMcpHandler, MemoryEventStore } from '@mcp-kit/core';
import { eventId, messageEvent, randomId } from '@mcp-kit/core/internal';
import { FILL_EVENTS_PER_STREAM, FILL_MESSAGE, FILL_STREAMS_PER_SESSION } from './control.mjs';
import { benchAuth } from './auth.mjs';
import { benchEnv, createBenchServer } from './tools.mjs';
import { createBenchServerV2 } from './tools-v2.mjs';

/**
 * An mcp-kit handler with its defaults (memory event store, priming, keep-alives) and the same
 * retry hint as the SDK server, serving the v1 bench server (or with BENCH_SDK=v2 the v2 one). The
 * store is created here only so `/bench/fill` can reach it.
 */
export function createKitHandler(name, env = benchEnv()) {
  const store = new MemoryEventStore(env.storeMaxBytes ? { maxBytes: env.storeMaxBytes } : {});
  const auth = env.auth ? benchAuth(env) : undefined;
  const handler = createMcpHandler({
    server: env.sdk === 'v2' ? () => createBenchServerV2(name) : () => createBenchServer(name),
    retryMs: env.retryMs,
    jsonResponse: env.json,
    eventStore: store,
    maxSessions: env.maxSessions,
    hibernateAfterMs: env.hibernateAfterMs,
    ...(auth ? { auth: auth.options } : {}),
  });
  const sessions = () => ({ sessions: handler.sessionCount, hibernated: handler.hibernatedSessionCount });
  return { handler, fill: (events) => fillKitStore(store, events), sessions, auth };
}

/** Appends `events` frames of made-up sessions and streams, as the engine would have stored them. */
export function fillKitStore(store, events) {
  let left = events;
  while (left > 0) {
    const sessionId = randomId();
    for (let s = 0; s < FILL_STREAMS_PER_SESSION && left > 0; s++) {
      const key = { sessionId, streamId: randomId() };
      store.createStream(key);
      const n = Math.min(FILL_EVENTS_PER_STREAM, left);
      for (let seq = 1; seq <= n; seq++) {
        store.append(
          key,
          seq,
          messageEvent(eventId(key.streamId, seq), JSON.stringify({ ...FILL_MESSAGE, params: { ...FILL_MESSAGE.params, seq } })),
          false,
        );
      }
      left -= n;
    }
  }
  return store.stats();
}
