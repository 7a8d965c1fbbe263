import { MODERN_VERSIONS, SERVER_INFO_KEY } from './envelope.js';
import type { Handshake } from './server-pool.js';

/** The Tasks extension's id (SEP-2663), as clients and servers declare it under `extensions`. */
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

/**
 * `server/discover`: what a 2026 client learns instead of an `initialize` result. Capabilities
 * are the server's own, less what the 2026 revision moved out of the core (`tasks` lives in its
 * extension now); `extensions` names what mcp-kit itself serves.
 */
export function discoverResult(handshake: Handshake, extensions: Record<string, object>): Record<string, unknown> {
  const { tasks: _legacyTasks, ...capabilities } = handshake.capabilities;
  const declared = { ...((capabilities.extensions as Record<string, object> | undefined) ?? {}), ...extensions };
  if (Object.keys(declared).length > 0) capabilities.extensions = declared;
  const result: Record<string, unknown> = {
    resultType: 'complete',
    supportedVersions: [...MODERN_VERSIONS],
    capabilities,
    // The answer depends on who asks (capabilities are per client kind): cache it privately, and
    // not at all, since the server's tools may change.
    ttlMs: 0,
    cacheScope: 'private',
    _meta: { [SERVER_INFO_KEY]: handshake.serverInfo },
  };
  if (handshake.instructions !== undefined) result.instructions = handshake.instructions;
  return result;
}
