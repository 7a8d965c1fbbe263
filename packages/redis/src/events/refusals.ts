import { StreamGap, StreamTakenOver } from '@mcp-kit/core';
import type { OwnerFence } from '../fence.js';
import { refusalOf, ScriptRefusal } from '../script-errors.js';

/**
 * Runs a fenced script; when it finds no owner record, asks whether Redis lost its data since
 * this instance's records were written, and if so runs it again with `force` (see fence.ts) for
 * what it had not stored yet (`items` of them in all). A refusal keeps the count of what went in
 * before it (`stored`).
 */
export async function fenced(
  fence: OwnerFence | undefined,
  items: number,
  run: (force: '0' | '1', stored: number) => Promise<unknown>,
): Promise<void> {
  try {
    await run('0', 0);
  } catch (error) {
    const refused = refusalOf(error);
    if (refused?.code !== ScriptRefusal.NoOwner || !fence || !(await fence.dataLost())) throw error;
    const stored = Math.min(refused.stored, items);
    try {
      await run('1', stored);
    } catch (again) {
      const more = refusalOf(again)?.stored ?? 0;
      throw Object.assign(again as Error, { stored: stored + more });
    }
  }
}

/**
 * What core knows a script's refusal by: {@link StreamTakenOver} (for good: not this instance's
 * session, or another instance answered the stream; the writer stops instead of retrying) or
 * {@link StreamGap}; any other error as it is. Each keeps `stored`, the frames that went in before it.
 */
export function refusal(error: unknown): unknown {
  const refused = refusalOf(error);
  const stored = (error as { stored?: number }).stored ?? refused?.stored ?? 0;
  if (!refused) return Object.assign(error as Error, { stored });
  if (refused.code === ScriptRefusal.Gap)
    return Object.assign(new StreamGap(refused.message, Number(refused.detail.split(' ')[0])), { stored });
  return Object.assign(new StreamTakenOver(refused.message), { stored });
}
