/**
 * How mcp-kit's Lua scripts refuse: an error reply whose first word is a code, `MCPKIT_<CODE>`,
 * then the number of frames the script stored before it refused (an append stores several in
 * one call), then prose for a person reading a log. Callers classify by the code, never by the
 * prose, which may change.
 */
export const ScriptRefusal = {
  /** The session is not this instance's any more (taken over, handed off or ended): no retry changes it. */
  NotMine: 'MCPKIT_NOT_MINE',
  /** The stream's final frame is stored (another instance answered it): nothing goes after it. */
  Complete: 'MCPKIT_COMPLETE',
  /** The frame before this one is not stored; the first word after the count is the first missing seq. */
  Gap: 'MCPKIT_GAP',
  /**
   * The session has no owner record: ended on purpose, or lost with Redis' data. The caller asks
   * whether Redis lost its data since this instance's records were written, and if so runs the
   * script again with `force` (the records are only not written back yet).
   */
  NoOwner: 'MCPKIT_NO_OWNER',
} as const;

export type ScriptRefusalCode = (typeof ScriptRefusal)[keyof typeof ScriptRefusal];

/** Lua: `refuse(code, stored, text)` raises the error reply the functions here read. */
export const REFUSE_LUA = `local function refuse(code, stored, text)
  return error({err = code .. ' ' .. stored .. ' ' .. text})
end
`;

/** A script's refusal, read from its error: the code, and how many frames went in before it. */
export interface Refused {
  code: ScriptRefusalCode;
  stored: number;
  /** The rest of the message (for {@link ScriptRefusal.Gap}, starts with the first missing seq). */
  detail: string;
  message: string;
}

const CODES = new Set<string>(Object.values(ScriptRefusal));

/** The refusal `error` carries, or `undefined` for any other error (an outage, a Redis error). */
export function refusalOf(error: unknown): Refused | undefined {
  if (!(error instanceof Error)) return undefined;
  const [code, stored, ...rest] = error.message.split(' ');
  if (code === undefined || !CODES.has(code)) return undefined;
  return { code: code as ScriptRefusalCode, stored: Number(stored) || 0, detail: rest.join(' '), message: error.message };
}
