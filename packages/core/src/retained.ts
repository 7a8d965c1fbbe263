import type { McpHandler } from './handler.js';
import type { EngineContext } from './engine/context.js';

/** What a handler holds for its sessions, summed over them (see {@link retainedBy}). */
export interface Retained {
  sessions: number;
  /** Open SSE connections. */
  connections: number;
  /** Open streams (standalone and request streams). */
  streams: number;
  /** Requests whose answer is still due. */
  requests: number;
  /** Streams answered while their client was away, until it comes back or is overdue. */
  awaited: number;
  /** Streams whose calls may outlive their response (`waitUntil`, `maxCallDurationMs`). */
  outliving: number;
}

/**
 * For tests: what `handler` holds per session, summed, each of which must come back to what is
 * live once clients let go (invariant: bounded). Walks every session: not for a hot path.
 */
export function retainedBy(handler: McpHandler): Retained {
  const { registry } = (handler as unknown as { ctx: EngineContext }).ctx;
  const retained: Retained = {
    sessions: registry.size,
    connections: registry.live.size,
    streams: 0,
    requests: 0,
    awaited: 0,
    outliving: 0,
  };
  for (const session of registry.sessions.values()) {
    const routes = session.routes.retained;
    retained.streams += routes.streams;
    retained.requests += routes.requests;
    retained.awaited += routes.awaited;
    retained.outliving += routes.outliving;
  }
  return retained;
}
