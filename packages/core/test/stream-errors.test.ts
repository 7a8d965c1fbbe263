import { describe, expect, it } from 'vitest';
import { StreamGap, StreamTakenOver } from '@mcp-kit/core';
import { isStreamGap, isStreamTakenOver } from '../src/ports/event-store.js';

describe("the EventStore contract's stream errors", () => {
  it('a StreamGap names the first frame the store does not hold, and is told from any other error', () => {
    const gap = new StreamGap('frame 2 of this stream is not stored yet', 2);
    expect(gap).toBeInstanceOf(Error);
    expect(gap.missingSeq).toBe(2);
    expect(isStreamGap(gap)).toBe(true);
    expect(isStreamTakenOver(gap)).toBe(false);
    expect(isStreamGap(new Error('frame 2 of this stream is not stored yet'))).toBe(false);
  });

  it('a StreamTakenOver is told from a gap', () => {
    const taken = new StreamTakenOver('not this instance’s session');
    expect(isStreamTakenOver(taken)).toBe(true);
    expect(isStreamGap(taken)).toBe(false);
  });

  it('an error of the same name from another copy of this package (its CJS and ESM builds side by side) is told too', () => {
    class OtherCopyGap extends Error {
      override readonly name = 'StreamGap';
      readonly missingSeq = 7;
    }
    expect(isStreamGap(new OtherCopyGap('gap'))).toBe(true);
  });
});
