import { describe, expect, it } from 'vitest';
import { MemoryEventStore, type MemoryEventStoreOptions, type StreamKey } from '@mcp-kit/core';
import { eventStoreContract } from './store-contract.js';

const S1 = 'session-1';
const S2 = 'session-2';
const A: StreamKey = { sessionId: S1, streamId: 'streamAstreamAstreamA0' };
const B: StreamKey = { sessionId: S1, streamId: 'streamBstreamBstreamB0' };
const C: StreamKey = { sessionId: S2, streamId: 'streamCstreamCstreamC0' };

/** A frame that names its stream and seq, so a replay shows exactly which frames came back. */
const frame = (key: StreamKey, seq: number) => `id: ${key.streamId.slice(0, 7)}.${seq}\ndata: {"n":${seq}}\n\n`;

/** Appends seq `from..to` to `key`; `finalAt` marks that seq as the final frame. */
function fill(store: MemoryEventStore, key: StreamKey, from: number, to: number, finalAt?: number): void {
  for (let seq = from; seq <= to; seq++) store.append(key, seq, frame(key, seq), seq === finalAt);
}

const frames = (key: StreamKey, from: number, to: number) => {
  const out: string[] = [];
  for (let seq = from; seq <= to; seq++) out.push(frame(key, seq));
  return out;
};

/** A store with a clock the test moves by hand. */
function clocked(options: MemoryEventStoreOptions = {}) {
  const clock = { t: 1_000_000 };
  const store = new MemoryEventStore({ ...options, now: () => clock.t });
  return { store, clock };
}

eventStoreContract('MemoryEventStore', (limits) => new MemoryEventStore(limits));

describe('MemoryEventStore: stream registration (stats)', () => {
  it('append without createStream registers the stream', () => {
    const store = new MemoryEventStore();
    fill(store, A, 1, 2);
    expect(store.stats()).toEqual({ streams: 1, events: 2, bytes: frame(A, 1).length + frame(A, 2).length });
  });

  it('createStream twice keeps one stream', () => {
    const store = new MemoryEventStore();
    store.createStream(A);
    fill(store, A, 1, 2);
    store.createStream(A);
    expect(store.stats().streams).toBe(1);
  });
});

describe('MemoryEventStore: per-stream cap (maxEventsPerStream)', () => {
  it('keeps the newest N frames; the oldest kept boundary resumes, older cursors are evicted', () => {
    const store = new MemoryEventStore({ maxEventsPerStream: 3 });
    store.createStream(A);
    fill(store, A, 1, 5);
    expect(store.stats()).toEqual({ streams: 1, events: 3, bytes: frames(A, 3, 5).join('').length });
    // Kept: 3, 4, 5. Cursor 2 is the frame just before the oldest kept one: a complete replay.
    expect(store.replayAfter(S1, A.streamId, 2)).toEqual({ ok: true, frames: frames(A, 3, 5), lastSeq: 5, complete: false });
    expect(store.replayAfter(S1, A.streamId, 3)).toEqual({ ok: true, frames: frames(A, 4, 5), lastSeq: 5, complete: false });
    // Frame 2 is gone: resuming after 1 (or 0) would be a silent partial replay.
    expect(store.replayAfter(S1, A.streamId, 1)).toEqual({ ok: false, reason: 'evicted' });
    expect(store.replayAfter(S1, A.streamId, 0)).toEqual({ ok: false, reason: 'evicted' });
  });

  it('caps each stream on its own', () => {
    const store = new MemoryEventStore({ maxEventsPerStream: 2 });
    fill(store, A, 1, 4);
    fill(store, B, 1, 2);
    expect(store.replayAfter(S1, A.streamId, 2)).toEqual({ ok: true, frames: frames(A, 3, 4), lastSeq: 4, complete: false });
    expect(store.replayAfter(S1, B.streamId, 0)).toEqual({ ok: true, frames: frames(B, 1, 2), lastSeq: 2, complete: false });
    expect(store.stats().events).toBe(4);
  });

  it('stays correct across many evictions (internal compaction)', () => {
    const store = new MemoryEventStore({ maxEventsPerStream: 10 });
    fill(store, A, 1, 5_000);
    expect(store.stats()).toEqual({ streams: 1, events: 10, bytes: frames(A, 4_991, 5_000).join('').length });
    expect(store.replayAfter(S1, A.streamId, 4_990)).toEqual({
      ok: true,
      frames: frames(A, 4_991, 5_000),
      lastSeq: 5_000,
      complete: false,
    });
    expect(store.replayAfter(S1, A.streamId, 4_995)).toEqual({
      ok: true,
      frames: frames(A, 4_996, 5_000),
      lastSeq: 5_000,
      complete: false,
    });
    expect(store.replayAfter(S1, A.streamId, 4_989)).toEqual({ ok: false, reason: 'evicted' });
  });
});

describe('MemoryEventStore: global byte limit (maxBytes)', () => {
  it('evicts the globally oldest frames first, across streams', () => {
    const unit = frame(A, 1).length;
    // Every frame below has the same length.
    expect(frame(B, 9).length).toBe(unit);
    const store = new MemoryEventStore({ maxBytes: unit * 3 });
    store.append(A, 1, frame(A, 1), false);
    store.append(B, 1, frame(B, 1), false);
    store.append(A, 2, frame(A, 2), false);
    expect(store.stats()).toEqual({ streams: 2, events: 3, bytes: unit * 3 });
    store.append(B, 2, frame(B, 2), false); // over by one frame: A1, the oldest, goes
    expect(store.stats()).toEqual({ streams: 2, events: 3, bytes: unit * 3 });
    expect(store.replayAfter(S1, A.streamId, 0)).toEqual({ ok: false, reason: 'evicted' });
    expect(store.replayAfter(S1, A.streamId, 1)).toEqual({ ok: true, frames: [frame(A, 2)], lastSeq: 2, complete: false });
    expect(store.replayAfter(S1, B.streamId, 0)).toEqual({ ok: true, frames: frames(B, 1, 2), lastSeq: 2, complete: false });

    store.append(A, 3, frame(A, 3), false); // B1 is now the oldest
    expect(store.replayAfter(S1, B.streamId, 0)).toEqual({ ok: false, reason: 'evicted' });
    expect(store.replayAfter(S1, B.streamId, 1)).toEqual({ ok: true, frames: [frame(B, 2)], lastSeq: 2, complete: false });
    expect(store.replayAfter(S1, A.streamId, 1)).toEqual({ ok: true, frames: frames(A, 2, 3), lastSeq: 3, complete: false });
  });

  it('counts bytes as string length and frees several small frames for one big one', () => {
    const store = new MemoryEventStore({ maxBytes: 10 });
    store.append(A, 1, 'aaa', false);
    store.append(A, 2, 'bbb', false);
    store.append(B, 1, 'ccc', false);
    expect(store.stats()).toEqual({ streams: 2, events: 3, bytes: 9 });
    store.append(B, 2, 'dddddd', false); // 15 > 10: drop aaa (12), then bbb (9)
    expect(store.stats()).toEqual({ streams: 2, events: 2, bytes: 9 });
    expect(store.replayAfter(S1, A.streamId, 1)).toEqual({ ok: false, reason: 'evicted' });
    expect(store.replayAfter(S1, A.streamId, 2)).toEqual({ ok: true, frames: [], lastSeq: 2, complete: false });
    expect(store.replayAfter(S1, B.streamId, 0)).toEqual({ ok: true, frames: ['ccc', 'dddddd'], lastSeq: 2, complete: false });
  });

  it('skips frames the per-stream cap already dropped (no double counting)', () => {
    const store = new MemoryEventStore({ maxEventsPerStream: 1, maxBytes: 6 });
    store.append(A, 1, 'aa', false);
    store.append(A, 2, 'bb', false); // cap drops aa
    store.append(B, 1, 'cc', false);
    expect(store.stats()).toEqual({ streams: 2, events: 2, bytes: 4 });
    store.append(C, 1, 'ddd', false); // 7 > 6: the oldest live frame is bb (aa is already gone)
    expect(store.stats()).toEqual({ streams: 3, events: 2, bytes: 5 });
    expect(store.replayAfter(S1, A.streamId, 1)).toEqual({ ok: false, reason: 'evicted' });
    expect(store.replayAfter(S1, A.streamId, 2)).toEqual({ ok: true, frames: [], lastSeq: 2, complete: false });
    expect(store.replayAfter(S1, B.streamId, 0)).toEqual({ ok: true, frames: ['cc'], lastSeq: 1, complete: false });
    expect(store.replayAfter(S2, C.streamId, 0)).toEqual({ ok: true, frames: ['ddd'], lastSeq: 1, complete: false });
  });
});

describe('MemoryEventStore: age limit (maxAgeMs) with an injected clock', () => {
  it('sweep(now) evicts frames older than maxAgeMs and keeps younger ones', () => {
    const { store, clock } = clocked({ maxAgeMs: 1_000 });
    store.append(A, 1, frame(A, 1), false); // t0
    clock.t += 400;
    store.append(A, 2, frame(A, 2), false); // t0 + 400
    store.append(B, 1, frame(B, 1), false); // t0 + 400

    store.sweep(clock.t + 599); // A1 is 999 ms old
    expect(store.stats().events).toBe(3);
    store.sweep(clock.t + 601); // A1 is 1001 ms old, the others 601
    expect(store.stats()).toEqual({ streams: 2, events: 2, bytes: frame(A, 2).length + frame(B, 1).length });
    store.sweep(clock.t + 1_401); // everything is older than 1000 ms
    expect(store.stats()).toEqual({ streams: 2, events: 0, bytes: 0 });
    // Streams that are not complete stay known; their old cursors are evicted, the last one is live.
    expect(store.replayAfter(S1, A.streamId, 1)).toEqual({ ok: false, reason: 'evicted' });
    expect(store.replayAfter(S1, A.streamId, 2)).toEqual({ ok: true, frames: [], lastSeq: 2, complete: false });
  });

  it('sweep() without an argument reads the injected clock', () => {
    const { store, clock } = clocked({ maxAgeMs: 1_000 });
    fill(store, A, 1, 2);
    clock.t += 999;
    store.sweep();
    expect(store.stats().events).toBe(2);
    clock.t += 2;
    store.sweep();
    expect(store.stats().events).toBe(0);
  });

  it('replayAfter applies the age limit by itself, with no sweep', () => {
    const { store, clock } = clocked({ maxAgeMs: 1_000 });
    store.append(A, 1, frame(A, 1), false);
    clock.t += 500;
    store.append(A, 2, frame(A, 2), false);
    clock.t += 501; // A1 is 1001 ms old, A2 501
    expect(store.replayAfter(S1, A.streamId, 0)).toEqual({ ok: false, reason: 'evicted' });
    expect(store.replayAfter(S1, A.streamId, 1)).toEqual({ ok: true, frames: [frame(A, 2)], lastSeq: 2, complete: false });
  });

  it('append evicts aged frames of other streams', () => {
    const { store, clock } = clocked({ maxAgeMs: 1_000 });
    fill(store, A, 1, 3);
    clock.t += 5_000;
    store.append(B, 1, frame(B, 1), false);
    expect(store.stats()).toEqual({ streams: 2, events: 1, bytes: frame(B, 1).length });
  });
});

describe('MemoryEventStore: completed streams and tombstones', () => {
  it('a completed stream whose frames were all evicted is evicted, not unknown', () => {
    const { store, clock } = clocked({ maxAgeMs: 1_000 });
    store.createStream(A);
    fill(store, A, 1, 3, 3);
    clock.t += 1_001;
    store.sweep();
    expect(store.stats()).toEqual({ streams: 0, events: 0, bytes: 0 });
    expect(store.replayAfter(S1, A.streamId, 0)).toEqual({ ok: false, reason: 'evicted' });
    expect(store.replayAfter(S1, A.streamId, 2)).toEqual({ ok: false, reason: 'evicted' });
    // A tombstone is still bound to its session.
    expect(store.replayAfter(S2, A.streamId, 0)).toEqual({ ok: false, reason: 'unknown' });
  });

  it('byte eviction turns a completed stream into a tombstone too', () => {
    const store = new MemoryEventStore({ maxBytes: 4 });
    store.append(A, 1, 'aa', false);
    store.append(A, 2, 'bb', true);
    store.append(B, 1, 'cccc', false);
    expect(store.stats()).toEqual({ streams: 1, events: 1, bytes: 4 });
    expect(store.replayAfter(S1, A.streamId, 0)).toEqual({ ok: false, reason: 'evicted' });
  });

  it('a stream that is not complete does not become a tombstone when emptied', () => {
    const { store, clock } = clocked({ maxAgeMs: 1_000 });
    fill(store, A, 1, 2);
    clock.t += 1_001;
    store.sweep();
    expect(store.stats().streams).toBe(1);
    // It can go on: a new frame after the evicted ones is replayable from the last cursor.
    store.append(A, 3, frame(A, 3), false);
    expect(store.replayAfter(S1, A.streamId, 2)).toEqual({ ok: true, frames: [frame(A, 3)], lastSeq: 3, complete: false });
    expect(store.replayAfter(S1, A.streamId, 1)).toEqual({ ok: false, reason: 'evicted' });
  });

  it('keeps at most maxTombstones tombstones, forgetting the oldest', () => {
    const { store, clock } = clocked({ maxAgeMs: 1_000, maxTombstones: 2 });
    const keys = [1, 2, 3].map((i): StreamKey => ({ sessionId: S1, streamId: `tombstone${i}`.padEnd(22, 'x') }));
    for (const key of keys) {
      store.append(key, 1, frame(key, 1), true);
      clock.t += 10; // evicted in this order
    }
    clock.t += 1_000;
    store.sweep();
    expect(store.stats()).toEqual({ streams: 0, events: 0, bytes: 0 });
    expect(store.replayAfter(S1, keys[0]!.streamId, 0)).toEqual({ ok: false, reason: 'unknown' });
    expect(store.replayAfter(S1, keys[1]!.streamId, 0)).toEqual({ ok: false, reason: 'evicted' });
    expect(store.replayAfter(S1, keys[2]!.streamId, 0)).toEqual({ ok: false, reason: 'evicted' });
  });
});

describe('MemoryEventStore: deleteSession', () => {
  it("drops the session's streams (cursors become unknown) and frees their events and bytes", () => {
    const store = new MemoryEventStore();
    fill(store, A, 1, 3);
    fill(store, B, 1, 2);
    fill(store, C, 1, 4);
    expect(store.stats()).toEqual({
      streams: 3,
      events: 9,
      bytes: [...frames(A, 1, 3), ...frames(B, 1, 2), ...frames(C, 1, 4)].join('').length,
    });
    store.deleteSession(S1);
    expect(store.stats()).toEqual({ streams: 1, events: 4, bytes: frames(C, 1, 4).join('').length });
    expect(store.replayAfter(S1, A.streamId, 0)).toEqual({ ok: false, reason: 'unknown' });
    expect(store.replayAfter(S1, B.streamId, 2)).toEqual({ ok: false, reason: 'unknown' });
    expect(store.replayAfter(S2, C.streamId, 0)).toEqual({ ok: true, frames: frames(C, 1, 4), lastSeq: 4, complete: false });
  });

  it('frees only what is still held after per-stream eviction', () => {
    const store = new MemoryEventStore({ maxEventsPerStream: 2 });
    fill(store, A, 1, 5);
    fill(store, C, 1, 1);
    store.deleteSession(S1);
    expect(store.stats()).toEqual({ streams: 1, events: 1, bytes: frame(C, 1).length });
  });

  it("drops the session's tombstones too", () => {
    const { store, clock } = clocked({ maxAgeMs: 1_000 });
    fill(store, A, 1, 1, 1);
    clock.t += 1_001;
    store.sweep();
    expect(store.replayAfter(S1, A.streamId, 0)).toEqual({ ok: false, reason: 'evicted' });
    store.deleteSession(S1);
    expect(store.replayAfter(S1, A.streamId, 0)).toEqual({ ok: false, reason: 'unknown' });
  });

  it('later global eviction skips the deleted frames and keeps the byte count exact', () => {
    const store = new MemoryEventStore({ maxBytes: 6 });
    store.append(A, 1, 'aa', false);
    store.append(C, 1, 'cc', false);
    store.deleteSession(S1);
    expect(store.stats()).toEqual({ streams: 1, events: 1, bytes: 2 });
    store.append(C, 2, 'dd', false);
    store.append(C, 3, 'ee', false);
    expect(store.stats()).toEqual({ streams: 1, events: 3, bytes: 6 });
    store.append(C, 4, 'ff', false); // 8 > 6: the stale entry of aa is skipped, cc goes
    expect(store.stats()).toEqual({ streams: 1, events: 3, bytes: 6 });
    expect(store.replayAfter(S2, C.streamId, 1)).toEqual({ ok: true, frames: ['dd', 'ee', 'ff'], lastSeq: 4, complete: false });
    expect(store.replayAfter(S2, C.streamId, 0)).toEqual({ ok: false, reason: 'evicted' });
  });

  it('is a no-op for an unknown session', () => {
    const store = new MemoryEventStore();
    fill(store, A, 1, 2);
    store.deleteSession('nobody');
    expect(store.stats().events).toBe(2);
  });
});

describe('MemoryEventStore: the eviction index stays bounded', () => {
  // White-box: the global append-order index is private, but it is memory the store holds, so the
  // store's bounds must cover it too.
  const indexSize = (store: MemoryEventStore) => {
    const internals = store as unknown as { qLog: unknown[]; qHead: number };
    return internals.qLog.length - internals.qHead;
  };

  it('does not keep an index entry per append when the per-stream cap drops frames', () => {
    const store = new MemoryEventStore({ maxEventsPerStream: 10 });
    fill(store, A, 1, 100_000);
    expect(store.stats().events).toBe(10);
    expect(indexSize(store)).toBeLessThanOrEqual(2 * 10 + 1024 + 1);
  });

  it('does not keep index entries of deleted sessions forever', () => {
    const store = new MemoryEventStore();
    for (let i = 0; i < 5_000; i++) {
      const key: StreamKey = { sessionId: `s${i}`, streamId: `stream${i}`.padEnd(22, '_') };
      fill(store, key, 1, 3);
      store.deleteSession(key.sessionId);
    }
    expect(store.stats()).toEqual({ streams: 0, events: 0, bytes: 0 });
    expect(indexSize(store)).toBeLessThanOrEqual(1024 + 1);
  });

  it('keeps global byte and age order after compacting', () => {
    const { store, clock } = clocked({ maxEventsPerStream: 2, maxAgeMs: 1_000, maxBytes: 1_000_000 });
    store.append(B, 1, 'b1', false); // oldest, at t0
    clock.t += 100;
    for (let seq = 1; seq <= 3_000; seq++) store.append(A, seq, `a${seq}`, false); // compacts on the way
    clock.t += 100;
    store.append(B, 2, 'b2', false);
    expect(indexSize(store)).toBeLessThan(3_000);
    expect(store.stats()).toEqual({ streams: 2, events: 4, bytes: 'b1a2999a3000b2'.length });
    // t0 + 1001: only b1 is older than 1000 ms.
    store.sweep(clock.t - 200 + 1_001);
    expect(store.replayAfter(S1, B.streamId, 0)).toEqual({ ok: false, reason: 'evicted' });
    expect(store.replayAfter(S1, B.streamId, 1)).toEqual({ ok: true, frames: ['b2'], lastSeq: 2, complete: false });
    expect(store.replayAfter(S1, A.streamId, 2_998)).toEqual({ ok: true, frames: ['a2999', 'a3000'], lastSeq: 3_000, complete: false });
    // t0 + 1101: the A frames (t0 + 100) go too, b2 (t0 + 200) stays.
    store.sweep(clock.t - 200 + 1_101);
    expect(store.stats()).toEqual({ streams: 2, events: 1, bytes: 2 });
    expect(store.replayAfter(S1, A.streamId, 2_999)).toEqual({ ok: false, reason: 'evicted' });
    expect(store.replayAfter(S1, A.streamId, 3_000)).toEqual({ ok: true, frames: [], lastSeq: 3_000, complete: false });
  });
});

describe('MemoryEventStore: option validation', () => {
  const names = ['maxEventsPerStream', 'maxBytes', 'maxAgeMs', 'maxTombstones'] as const;
  for (const name of names) {
    for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      it(`rejects ${name} = ${bad} with a RangeError naming the option`, () => {
        expect(() => new MemoryEventStore({ [name]: bad })).toThrow(RangeError);
        expect(() => new MemoryEventStore({ [name]: bad })).toThrow(
          `MemoryEventStore: ${name} must be a positive integer, got ${String(bad)}`,
        );
      });
    }
  }

  it('has documented defaults', () => {
    const store = new MemoryEventStore();
    expect(store.maxEventsPerStream).toBe(10_000);
    expect(store.maxBytes).toBe(64 * 1024 * 1024);
    expect(store.maxAgeMs).toBe(15 * 60_000);
    expect(store.maxTombstones).toBe(10_000);
    expect(store.stats()).toEqual({ streams: 0, events: 0, bytes: 0 });
  });
});

describe('MemoryEventStore: replay does not depend on store size', () => {
  it('returns exactly the expected slice after 200k frames of other streams', () => {
    const store = new MemoryEventStore({ maxEventsPerStream: 1_000_000, maxBytes: 1_000_000_000 });
    const target: StreamKey = { sessionId: 'target', streamId: 'targettargettargettarg' };
    const others: StreamKey[] = [];
    for (let i = 0; i < 200; i++) others.push({ sessionId: `s${i % 50}`, streamId: `other${i}`.padEnd(22, '-') });
    store.createStream(target);
    let targetSeq = 0;
    const otherSeq = new Array<number>(others.length).fill(0);
    // 200k frames of other streams, interleaved with 100 frames of the target.
    for (let i = 0; i < 200_000; i++) {
      const k = i % others.length;
      store.append(others[k]!, ++otherSeq[k]!, 'x', false);
      if (i % 2_000 === 0) {
        targetSeq++;
        store.append(target, targetSeq, frame(target, targetSeq), false);
      }
    }
    expect(targetSeq).toBe(100);
    expect(store.stats()).toEqual({ streams: 201, events: 200_100, bytes: 200_000 + frames(target, 1, 100).join('').length });
    expect(store.replayAfter('target', target.streamId, 97)).toEqual({
      ok: true,
      frames: frames(target, 98, 100),
      lastSeq: 100,
      complete: false,
    });
    expect(store.replayAfter('target', target.streamId, 0)).toEqual({
      ok: true,
      frames: frames(target, 1, 100),
      lastSeq: 100,
      complete: false,
    });
    expect(store.replayAfter('target', target.streamId, 100)).toEqual({ ok: true, frames: [], lastSeq: 100, complete: false });
  });
});
