import { describe, expect, it } from 'vitest';
import { eventId, parseEventId, randomId } from '@mcp-kit/core/internal';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const TOKEN = 'AbCdEfGhIjKlMnOpQrSt-_';

describe('randomId', () => {
  it('is 22 base64url characters', () => {
    for (let i = 0; i < 100; i++) expect(randomId()).toMatch(/^[A-Za-z0-9_-]{22}$/);
  });

  it('gives 1,000 distinct ids', () => {
    const ids = new Set<string>();
    for (let i = 0; i < 1_000; i++) ids.add(randomId());
    expect(ids.size).toBe(1_000);
  });

  it('uses every one of the 64 alphabet characters across 10k ids', () => {
    const seen = new Set<string>();
    for (let i = 0; i < 10_000; i++) for (const ch of randomId()) seen.add(ch);
    expect([...seen].sort().join('')).toBe([...ALPHABET].sort().join(''));
  });

  it('spreads every one of the first 21 positions over the whole alphabet', () => {
    // 21 × 6 = 126 random bits; the 22nd character carries the last 2 bits (4 values). A position
    // stuck on a subset of the alphabet would mean lost entropy.
    const perPosition = Array.from({ length: 22 }, () => new Set<string>());
    for (let i = 0; i < 10_000; i++) {
      const id = randomId();
      for (let p = 0; p < 22; p++) perPosition[p]!.add(id[p]!);
    }
    for (let p = 0; p < 21; p++) expect(perPosition[p]!.size, `position ${p}`).toBe(64);
    expect([...perPosition[21]!].sort()).toEqual(['A', 'Q', 'g', 'w']);
  });

  it('is an id parseEventId accepts as a stream token', () => {
    const id = randomId();
    expect(parseEventId(`${id}.0`)).toEqual({ streamId: id, seq: 0 });
  });
});

describe('eventId / parseEventId', () => {
  it('round-trips token and seq', () => {
    for (const seq of [0, 1, 9, 10, 12_345, 999_999_999_999_999]) {
      const id = eventId(TOKEN, seq);
      expect(id).toBe(`${TOKEN}.${seq}`);
      expect(parseEventId(id)).toEqual({ streamId: TOKEN, seq });
    }
  });

  it('round-trips random tokens', () => {
    for (let i = 0; i < 100; i++) {
      const token = randomId();
      expect(parseEventId(eventId(token, i))).toEqual({ streamId: token, seq: i });
    }
  });

  const malformed: Array<[string, string]> = [
    ['empty', ''],
    ['no dot', 'abc'],
    ['token without seq', `${TOKEN}.`],
    ['seq with a leading zero', `${TOKEN}.01`],
    ['negative seq', `${TOKEN}.-1`],
    ['seq of 16 digits (beyond 15)', `${TOKEN}.1234567890123456`],
    ['seq beyond MAX_SAFE_INTEGER', `${TOKEN}.9007199254740993`],
    ['21-character token', `${TOKEN.slice(1)}.1`],
    ['23-character token', `${TOKEN}x.1`],
    ['extra dot at the end', `${TOKEN}.1.`],
    ['extra dot segment', `${TOKEN}.1.2`],
    ['dot inside the token', `${TOKEN.slice(0, 10)}.${TOKEN.slice(11)}.1`],
    ['non-base64url character in the token', `${TOKEN.slice(0, 21)}+.1`],
    ['padding in the token', `${TOKEN.slice(0, 21)}=.1`],
    ['decimal seq', `${TOKEN}.1.5`],
    ['exponent seq', `${TOKEN}.1e3`],
    ['plus sign seq', `${TOKEN}.+1`],
    ['hex seq', `${TOKEN}.0x1`],
    ['leading space', ` ${TOKEN}.1`],
    ['trailing space', `${TOKEN}.1 `],
    ['trailing newline', `${TOKEN}.1\n`],
    ['only a seq', '.1'],
  ];
  for (const [what, value] of malformed) {
    it(`rejects ${what}: ${JSON.stringify(value)}`, () => {
      expect(parseEventId(value)).toBeUndefined();
    });
  }

  it('accepts the largest 15-digit seq as a safe integer', () => {
    const parsed = parseEventId(`${TOKEN}.999999999999999`);
    expect(parsed).toEqual({ streamId: TOKEN, seq: 999_999_999_999_999 });
    expect(Number.isSafeInteger(parsed!.seq)).toBe(true);
  });
});
