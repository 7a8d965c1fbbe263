/**
 * Ids with 128 bits of randomness, base64url: session ids and stream tokens. Event ids are
 * `<stream token>.<seq>`; the token is unguessable and bound to one session by the store, so a
 * cursor from another session, or a guessed one, never replays anything.
 */
export function randomId(): string {
  // One getRandomValues call per 256 ids: the call, not the bytes, is what costs (one per stream).
  if (poolOffset + 16 > pool.length) {
    globalThis.crypto.getRandomValues(pool);
    poolOffset = 0;
  }
  const at = poolOffset;
  poolOffset += 16;
  // 16 × 6 bits from the low bits = 96 bits; add the remaining high bits in 6 more characters.
  for (let i = 0; i < 16; i++) chars[i] = ALPHABET_CODES[(pool[at + i] as number) & 63] as number;
  let rest = 0;
  let bits = 0;
  let n = 16;
  for (let i = at; i < at + 16; i++) {
    rest = (rest << 2) | ((pool[i] as number) >> 6);
    bits += 2;
    if (bits === 6) {
      chars[n++] = ALPHABET_CODES[rest] as number;
      rest = 0;
      bits = 0;
    }
  }
  chars[n] = ALPHABET_CODES[rest << (6 - bits)] as number;
  // From char codes, not `+=`: appending builds a rope of 22 nested strings that the id (kept as a
  // map key for the stream's lifetime) would drag along.
  return String.fromCharCode.apply(null, chars as unknown as number[]);
}

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const ALPHABET_CODES = Uint8Array.from(ALPHABET, (c) => c.charCodeAt(0));
const pool = new Uint8Array(16 * 256);
let poolOffset = pool.length;
const chars = new Uint8Array(22);

export function eventId(streamId: string, seq: number): string {
  return `${streamId}.${seq}`;
}

const EVENT_ID = /^([A-Za-z0-9_-]{22})\.(0|[1-9][0-9]{0,14})$/;

/** Parses a `Last-Event-ID`; `undefined` when it is not one of ours. */
export function parseEventId(value: string): { streamId: string; seq: number } | undefined {
  const m = EVENT_ID.exec(value);
  if (!m) return undefined;
  return { streamId: m[1] as string, seq: Number(m[2]) };
}

/**
 * A cursor handed back while the store cannot serve a resume (an outage): the client's own cursor
 * with how many times it was sent back already, so the next `retry:` backs off on any instance.
 */
export function waitingCursor(cursor: string, waits: number): string {
  return `${cursor}~${waits}`;
}

const WAITING = /^(.*)~([0-9]{1,3})$/;

/** Splits a {@link waitingCursor} into the client's cursor and its count (0 for a plain cursor). */
export function parseWaitingCursor(value: string): { cursor: string; waits: number } {
  const m = WAITING.exec(value);
  return m ? { cursor: m[1] as string, waits: Number(m[2]) } : { cursor: value, waits: 0 };
}
