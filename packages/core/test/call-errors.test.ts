/**
 * The errors a call gets in place of its result are defined once, in http/call-errors.ts (the
 * catalogue docs/protocol.md lists): no other module of core writes one of its own.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  callTooLong,
  LOST_CALL,
  LOST_EVENTS,
  TASK_SERVER_SHUT_DOWN,
  taskInstanceLost,
  unstoredBytesOverLimit,
} from '../src/http/call-errors.js';

const SRC = join(import.meta.dirname, '../src');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sources(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
  );
}

/** A module's text without its comments (a doc comment may name the code). */
const code = (text: string) => text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');

describe('the catalogue of call errors', () => {
  it('is where every -32603 a call is answered with comes from', () => {
    const elsewhere = sources(SRC)
      .filter((file) => !['http/call-errors.ts', 'http/errors.ts'].includes(relative(SRC, file)))
      .filter((file) => /-32603|code:\s*ErrorCode\.InternalError/.test(code(readFileSync(file, 'utf8'))))
      .map((file) => relative(SRC, file));
    expect(elsewhere).toEqual([]);
  });

  it('every entry is a JSON-RPC internal error that tells the client what happened', () => {
    const entries = [
      LOST_EVENTS,
      LOST_CALL,
      unstoredBytesOverLimit(1024),
      callTooLong(500),
      TASK_SERVER_SHUT_DOWN,
      taskInstanceLost('i-1'),
    ];
    for (const entry of entries) expect(entry.code).toBe(-32603);
    expect(new Set(entries.map((e) => e.message)).size).toBe(entries.length);
    expect(unstoredBytesOverLimit(1024).data).toEqual({ maxUnstoredBytes: 1024 });
    expect(callTooLong(500).data).toEqual({ maxCallDurationMs: 500 });
  });
});
