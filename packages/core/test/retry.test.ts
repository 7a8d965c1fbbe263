import { describe, expect, it, vi } from 'vitest';
import {
  BRIEF_RETRIES_MS,
  COME_BACK_LATER_MS,
  pauseBefore,
  REDIS_RECONNECT_MS,
  retriedWhile,
  triedWhile,
  withBriefRetries,
} from '../src/util/retry.js';

/** An operation that fails `failures` times (the first by throwing synchronously), then answers `value`. */
function flaky<T>(failures: number, value: T) {
  let calls = 0;
  const op = vi.fn(() => {
    calls++;
    if (calls === 1 && failures > 0) throw new Error('failure 1');
    if (calls <= failures) return Promise.reject(new Error(`failure ${calls}`));
    return Promise.resolve(value);
  });
  return op;
}

describe('pauseBefore', () => {
  it('walks a schedule and repeats its last pause past its end', () => {
    expect([0, 1, 2, 3, 4, 5, 9].map((i) => pauseBefore(COME_BACK_LATER_MS, i))).toEqual([500, 1_000, 2_000, 4_000, 5_000, 5_000, 5_000]);
  });

  it("REDIS_RECONNECT_MS is ioredis' 100 ms more per reconnect, to every 2 s", () => {
    for (let times = 1; times <= 40; times++) expect(pauseBefore(REDIS_RECONNECT_MS, times - 1)).toBe(Math.min(100 * times, 2_000));
  });
});

describe('withBriefRetries', () => {
  it('answers the first try when it succeeds, without trying again', async () => {
    const op = flaky(0, 'ok');
    expect(await withBriefRetries(op)).toBe('ok');
    expect(op).toHaveBeenCalledTimes(1);
  });

  it('tries again after a synchronous throw and a rejection, and answers the try that succeeds', async () => {
    const op = flaky(2, 'ok');
    expect(await withBriefRetries(op)).toBe('ok');
    expect(op).toHaveBeenCalledTimes(3);
  });

  it('gives up with the last error once the brief schedule is spent', async () => {
    const op = flaky(10, 'never');
    await expect(withBriefRetries(op)).rejects.toThrow(`failure ${BRIEF_RETRIES_MS.length + 1}`);
    expect(op).toHaveBeenCalledTimes(BRIEF_RETRIES_MS.length + 1);
  });

  it('takes a first try the caller made already, and only retries with op', async () => {
    const op = flaky(0, 'again');
    expect(await withBriefRetries(op, 'first')).toBe('first');
    expect(op).not.toHaveBeenCalled();
    expect(await withBriefRetries(op, Promise.reject(new Error('first failed')))).toBe('again');
    expect(op).toHaveBeenCalledTimes(1);
  });
});

describe('triedWhile and retriedWhile', () => {
  it('tries until the write succeeds: undefined', async () => {
    const op = flaky(3, 'ok');
    expect(await triedWhile(op, () => true)).toBeUndefined();
    expect(op).toHaveBeenCalledTimes(4);
  });

  it('stops when goOn says so, with the last error', async () => {
    const op = flaky(10, 'never');
    let tries = 0;
    const last = await triedWhile(op, () => ++tries < 3);
    expect((last as Error).message).toBe('failure 3');
    expect(op).toHaveBeenCalledTimes(3);
  });

  it('retriedWhile does not try at all when goOn already says stop', async () => {
    const op = flaky(0, 'ok');
    const error = new Error('the first try');
    expect(await retriedWhile(op, error, () => false)).toBe(error);
    expect(op).not.toHaveBeenCalled();
  });
});
