/**
 * A session's routes hold the answers its client was away for only as long as it is expected back
 * for them, and none for requests it cancelled (invariant: bounded): a long-lived session whose
 * clients abandon their streams does not grow them without bound.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { EventStore } from '../src/ports/event-store.js';
import { expectedBack, StreamRoutes } from '../src/session/routes.js';
import { Stream } from '../src/streams/stream.js';

const RETRY_MS = 1_000;
const doneWriting = vi.fn<NonNullable<EventStore['doneWriting']>>();
const OPTIONS = { retryMs: RETRY_MS, eventStore: { doneWriting } as unknown as EventStore };
let n = 0;

/** A polling request stream with no connection attached (its client is away). */
function awayStream(routes: StreamRoutes, ...ids: number[]): Stream {
  return routes.add(new Stream(`stream-${++n}`, 'session', 'request', new Set(ids), true, true));
}

afterEach(() => {
  vi.restoreAllMocks();
  doneWriting.mockClear();
});

describe('StreamRoutes: what a session awaits is bounded', () => {
  it('answers written while the client was away are awaited until it is overdue, then let go as new ones come', () => {
    let now = 1_000_000;
    vi.spyOn(Date, 'now').mockImplementation(() => now);
    const routes = new StreamRoutes();
    for (let i = 0; i < 100; i++) {
      const stream = awayStream(routes, i + 1);
      expect(routes.answer(stream, i + 1)).toBe(true);
      routes.complete(stream, OPTIONS);
    }
    expect(routes.retained.awaited).toBe(100);
    // Past when their clients were expected back: the next stream answered away lets them go.
    now = expectedBack(now, RETRY_MS) + 1;
    const late = awayStream(routes, 1_000);
    routes.answer(late, 1_000);
    routes.complete(late, OPTIONS);
    expect(routes.retained).toEqual({ streams: 0, requests: 0, awaited: 1, outliving: 0 });
    expect(routes.answersAwaited(late.id)?.ids).toEqual([1_000]);
  });

  it('a stream whose requests were cancelled while its client was away is not awaited (its client does not come back for it), and the store hears nothing more is written to it', () => {
    const routes = new StreamRoutes();
    const cancelled = awayStream(routes, 1);
    expect(routes.cancelled(1)).toBe(cancelled);
    routes.complete(cancelled, OPTIONS, true);
    // One request answered away, the other cancelled: the answer is still awaited.
    const mixed = awayStream(routes, 2, 3);
    expect(routes.answer(mixed, 2)).toBe(false);
    expect(routes.cancelled(3)).toBe(mixed);
    routes.complete(mixed, OPTIONS, true);
    expect(routes.retained).toEqual({ streams: 0, requests: 0, awaited: 1, outliving: 0 });
    expect(routes.answersAwaited(mixed.id)?.ids).toEqual([2]);
    // No final frame is stored for a cancelled request: the store hears that nothing more comes.
    expect(doneWriting.mock.calls).toEqual([
      ['session', cancelled.id],
      ['session', mixed.id],
    ]);
  });

  it('a stream that never went on the wire: the store, which may have registered it, hears nothing more is written to it', () => {
    const routes = new StreamRoutes();
    const stream = awayStream(routes, 1);
    routes.remove(stream, OPTIONS.eventStore);
    expect(routes.retained).toEqual({ streams: 0, requests: 0, awaited: 0, outliving: 0 });
    expect(doneWriting.mock.calls).toEqual([['session', stream.id]]);
  });
});
