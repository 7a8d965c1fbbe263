import type { JSONRPCMessage } from '../ports/mcp.js';

/** How long an answer is reused before the factory's server is asked again (a server whose answer changes is followed this soon). */
const ANSWER_TTL_MS = 10_000;
/** Distinct answers kept at once (one per protocol version, client capabilities and principal seen lately). */
const MAX_ANSWERS = 256;

/**
 * What the server factory's servers answered to `initialize`, reused for later sessions that ask
 * the same. Both SDK majors answer from the server's own settings and the protocol version the
 * client requested alone (`Server._oninitialize`: `protocolVersion`, `capabilities`, `serverInfo`,
 * `instructions`), so a session whose client sends what another one sent gets that answer without
 * a server of its own: its server is built when a request first needs it, and the client's
 * `initialize` is replayed to it then (as for hibernation). The key holds the whole of what the
 * client sent and the principal (see {@link answerKey}), so that a factory whose server depends on
 * them is still asked once for each; an answer is asked for again every {@link ANSWER_TTL_MS}.
 */
export class InitializeAnswers {
  private readonly answers = new Map<string, { result: Record<string, unknown>; until: number }>();

  /** The reused answer for this `initialize`, if one is known; `undefined` when a server must answer it. */
  find(key: string, now: number = Date.now()): Record<string, unknown> | undefined {
    const known = this.answers.get(key);
    if (!known) return undefined;
    if (known.until < now) {
      this.answers.delete(key);
      return undefined;
    }
    return known.result;
  }

  /** A server answered an `initialize` of this key: the answer is reused for a while. */
  learn(key: string, result: Record<string, unknown>, now: number = Date.now()): void {
    this.answers.delete(key);
    this.answers.set(key, { result, until: now + ANSWER_TTL_MS });
    if (this.answers.size > MAX_ANSWERS) this.answers.delete(this.answers.keys().next().value!);
  }
}

/**
 * The key of an `initialize` whose answer may be reused: everything the client sent in it but
 * `_meta` (which carries per-request data, not what the server is told of the client), and the
 * principal. An answer is learned only from a server that accepted those very params, so a client
 * that sends what no server would accept is never answered from here.
 */
export function answerKey(initialize: JSONRPCMessage, principal: string | undefined): string | undefined {
  const params = (initialize as { params?: unknown }).params;
  if (typeof params !== 'object' || params === null || Array.isArray(params)) return undefined;
  const { _meta: _ignored, ...told } = params as Record<string, unknown>;
  return JSON.stringify([told, principal ?? null]);
}
