import { describe, expect, it, vi } from 'vitest';
import { closeSSEStream, closeStandaloneSSEStream, type SSEStreamControls } from '@mcp-kit/core';

const helpers = [
  ['closeSSEStream', closeSSEStream, 'closeSSEStream'],
  ['closeStandaloneSSEStream', closeStandaloneSSEStream, 'closeStandaloneSSEStream'],
] as const;

for (const [name, helper, field] of helpers) {
  describe(name, () => {
    const extraWith = (fn: (retryMs?: number) => unknown): SSEStreamControls => ({ [field]: fn }) as SSEStreamControls;

    it('returns false when extra has no callback (JSON response, stateless, legacy client)', () => {
      expect(helper({})).toBe(false);
      expect(helper({}, 500)).toBe(false);
    });

    it('ignores the other callback', () => {
      const other = vi.fn(() => true);
      const otherField = field === 'closeSSEStream' ? 'closeStandaloneSSEStream' : 'closeSSEStream';
      expect(helper({ [otherField]: other } as SSEStreamControls, 10)).toBe(false);
      expect(other).not.toHaveBeenCalled();
    });

    it('passes the retry value through, once', () => {
      const fn = vi.fn((_retryMs?: number) => true);
      expect(helper(extraWith(fn), 10_000)).toBe(true);
      expect(fn).toHaveBeenCalledTimes(1);
      expect(fn).toHaveBeenCalledWith(10_000);
    });

    it('passes 0 (reconnect at once) through', () => {
      const fn = vi.fn((_retryMs?: number) => true);
      expect(helper(extraWith(fn), 0)).toBe(true);
      expect(fn).toHaveBeenCalledWith(0);
    });

    it('passes undefined when no retry is given, so the handler default applies', () => {
      const fn = vi.fn((_retryMs?: number) => true);
      expect(helper(extraWith(fn))).toBe(true);
      expect(fn).toHaveBeenCalledTimes(1);
      expect(fn.mock.calls[0]).toEqual([undefined]);
    });

    it('returns true for an SDK-style callback that returns nothing', () => {
      const fn = vi.fn(() => undefined);
      expect(helper(extraWith(fn), 5)).toBe(true);
      expect(fn).toHaveBeenCalledTimes(1);
    });

    it('returns false when the callback says there was nothing to close', () => {
      const fn = vi.fn(() => false);
      expect(helper(extraWith(fn), 5)).toBe(false);
      expect(fn).toHaveBeenCalledTimes(1);
    });

    for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, -0.5]) {
      it(`rejects retryMs = ${bad} with a RangeError naming ${name}, without calling back`, () => {
        const fn = vi.fn(() => true);
        expect(() => helper(extraWith(fn), bad)).toThrow(RangeError);
        expect(() => helper(extraWith(fn), bad)).toThrow(`${name}: retryMs must be a non-negative integer, got ${String(bad)}`);
        expect(fn).not.toHaveBeenCalled();
      });
    }

    it('rejects a bad retryMs even when there is nothing to close, so the mistake shows in every mode', () => {
      expect(() => helper({}, -1)).toThrow(`${name}: retryMs must be a non-negative integer, got -1`);
    });
  });
}
