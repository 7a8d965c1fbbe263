/**
 * Ids with 128 bits of randomness, base64url: session ids and stream tokens. Event ids are
 * `<stream token>.<seq>`; the token is unguessable and bound to one session by the store, so a
 * cursor from another session, or a guessed one, never replays anything.
 */
export function randomId(): string {
  const bytes = new Uint8Array(16);
  globalThis.crypto.getRandomValues(bytes);
  let out = '';
  for (let i = 0; i < 16; i++) out += ALPHABET[(bytes[i] as number) & 63];
  // 16 × 6 bits from the low bits = 96 bits; add the remaining high bits in 6 more characters.
  let rest = 0;
  let bits = 0;
  for (let i = 0; i < 16; i++) {
    rest = (rest << 2) | ((bytes[i] as number) >> 6);
    bits += 2;
    if (bits === 6) {
      out += ALPHABET[rest];
      rest = 0;
      bits = 0;
    }
  }
  return out + ALPHABET[rest << (6 - bits)];
}

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

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
