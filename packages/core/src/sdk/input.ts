import type { MessageExtraInfo } from '../ports/mcp.js';

/** The raw params of each 2026-era request, by the `requestInfo` object its handler receives. */
const paramsByRequest = new WeakMap<object, Record<string, unknown>>();

/** Lets {@link inputResponses} find a request's params from its handler's context. */
export function rememberParams(requestInfo: MessageExtraInfo['requestInfo'], params: Record<string, unknown> | undefined): void {
  if (requestInfo && params) paramsByRequest.set(requestInfo, params);
}

/** A context of either SDK major, as far as the 2026 input round trip goes. */
export type InputContext = { requestInfo?: object } | { mcpReq?: { inputResponses?: Record<string, unknown> } };

/**
 * The answers a 2026-07-28 client sent back for an `input_required` result (SEP-2322), under
 * the keys the tool asked with; `undefined` on a first round. SDK v2 handlers also find them as
 * `ctx.mcpReq.inputResponses`; SDK v1 handlers have no field for them, so this reads them for both.
 *
 * @example
 * ```ts source="../../examples/core.examples.ts#inputResponses"
 * server.registerTool('greet_user', {}, async (extra) => {
 *   const answer = inputResponses(extra)?.user_name as { action: string; content?: { name?: string } } | undefined;
 *   if (answer?.action === 'accept') return { content: [{ type: 'text', text: `Hello, ${answer.content?.name}!` }] };
 *   const ask = {
 *     mode: 'form',
 *     message: 'What is your name?',
 *     requestedSchema: { type: 'object', properties: { name: { type: 'string' } } },
 *   };
 *   return { resultType: 'input_required', inputRequests: { user_name: { method: 'elicitation/create', params: ask } }, content: [] };
 * });
 * ```
 */
export function inputResponses(ctx: InputContext): Record<string, unknown> | undefined {
  const v2 = (ctx as { mcpReq?: { inputResponses?: Record<string, unknown> } }).mcpReq?.inputResponses;
  if (v2 !== undefined) return v2;
  return rawParam(ctx, 'inputResponses') as Record<string, unknown> | undefined;
}

/**
 * The `requestState` a 2026-07-28 client echoed back with its input responses, as the tool wrote
 * it (verify its integrity yourself: the client holds it). SDK v2 verifies and decodes it for
 * you (`ctx.mcpReq.requestState()`, with the server's `requestState.verify`).
 */
export function requestState(ctx: InputContext): string | undefined {
  const value = rawParam(ctx, 'requestState');
  return typeof value === 'string' ? value : undefined;
}

function rawParam(ctx: InputContext, name: string): unknown {
  const info = (ctx as { requestInfo?: object }).requestInfo;
  return info === undefined ? undefined : paramsByRequest.get(info)?.[name];
}
