/**
 * The behaviour every {@link EventStore} owes the engine, defined once and run against each store
 * (the memory store here, `RedisEventStore` against a real redis-server). Store internals (byte
 * accounting, clocks, index sizes) are tested next to each store, not here.
 */
import { describe, expect, it } from 'vitest';
import type { EventStore, ReplayResult, StreamKey } from '@mcp-kit/core';

/** Limits a contract case may ask for; every store under contract must honour them. */
export interface ContractLimits {
  maxEventsPerStream?: number;
}

/** Makes an empty store. Sessions and streams are fresh per case, so a shared backend is fine. */
export type MakeStore = (limits?: ContractLimits) => EventStore | Promise<EventStore>;

let unique = 0;
/** Keys unique across cases and runs, so stores backed by one server never see each other's data. */
function keys() {
  const run = `${process.pid.toString(36)}${(unique++).toString(36)}`.padEnd(8, '_');
  const S1 = `session-1-${run}`;
  const S2 = `session-2-${run}`;
  const A: StreamKey = { sessionId: S1, streamId: `A${run}`.padEnd(22, 'a') };
  const B: StreamKey = { sessionId: S1, streamId: `B${run}`.padEnd(22, 'b') };
  const C: StreamKey = { sessionId: S2, streamId: `C${run}`.padEnd(22, 'c') };
  return { S1, S2, A, B, C };
}

/** A frame that names its stream and seq, so a replay shows exactly which frames came back. */
export const frame = (key: StreamKey, seq: number) => `id: ${key.streamId}.${seq}\ndata: {"n":${seq}}\n\n`;

export const frames = (key: StreamKey, from: number, to: number) => {
  const out: string[] = [];
  for (let seq = from; seq <= to; seq++) out.push(frame(key, seq));
  return out;
};

/** Appends seq `from..to` to `key`; `finalAt` marks that seq as the final frame. */
async function fill(store: EventStore, key: StreamKey, from: number, to: number, finalAt?: number): Promise<void> {
  for (let seq = from; seq <= to; seq++) await store.append(key, seq, frame(key, seq), seq === finalAt);
}

const ok = (f: string[], lastSeq: number, complete = false): ReplayResult => ({ ok: true, frames: f, lastSeq, complete });
const UNKNOWN: ReplayResult = { ok: false, reason: 'unknown' };
const EVICTED: ReplayResult = { ok: false, reason: 'evicted' };

export function eventStoreContract(name: string, makeStore: MakeStore): void {
  describe(`${name}: the EventStore contract`, () => {
    it('replays a freshly created stream from cursor 0 as empty and not complete', async () => {
      const { S1, A } = keys();
      const store = await makeStore();
      await store.createStream(A);
      expect(await store.replayAfter(S1, A.streamId, 0)).toEqual(ok([], 0));
    });

    it('cursor 0 replays everything, oldest first, byte for byte', async () => {
      const { S1, A } = keys();
      const store = await makeStore();
      await store.createStream(A);
      await fill(store, A, 1, 5);
      expect(await store.replayAfter(S1, A.streamId, 0)).toEqual(ok(frames(A, 1, 5), 5));
    });

    it('a middle cursor replays exactly the frames after it', async () => {
      const { S1, A } = keys();
      const store = await makeStore();
      await store.createStream(A);
      await fill(store, A, 1, 5);
      expect(await store.replayAfter(S1, A.streamId, 2)).toEqual(ok(frames(A, 3, 5), 5));
      expect(await store.replayAfter(S1, A.streamId, 4)).toEqual(ok([frame(A, 5)], 5));
    });

    it('the cursor of the last frame replays nothing, with lastSeq = cursor', async () => {
      const { S1, A } = keys();
      const store = await makeStore();
      await store.createStream(A);
      await fill(store, A, 1, 3);
      expect(await store.replayAfter(S1, A.streamId, 3)).toEqual(ok([], 3));
    });

    it('a cursor beyond the last frame, or negative, is unknown (never issued)', async () => {
      const { S1, A } = keys();
      const store = await makeStore();
      await store.createStream(A);
      await fill(store, A, 1, 3);
      expect(await store.replayAfter(S1, A.streamId, 4)).toEqual(UNKNOWN);
      expect(await store.replayAfter(S1, A.streamId, 1_000)).toEqual(UNKNOWN);
      expect(await store.replayAfter(S1, A.streamId, -1)).toEqual(UNKNOWN);
    });

    it("another session's stream is unknown and never yields its frames", async () => {
      const { S1, S2, C } = keys();
      const store = await makeStore();
      await store.createStream(C);
      await fill(store, C, 1, 3);
      for (const cursor of [0, 1, 3]) expect(await store.replayAfter(S1, C.streamId, cursor)).toEqual(UNKNOWN);
      // The owner still gets them.
      expect(await store.replayAfter(S2, C.streamId, 0)).toEqual(ok(frames(C, 1, 3), 3));
    });

    it('a stream that was never created is unknown', async () => {
      const { S1, A } = keys();
      const store = await makeStore();
      await store.createStream(A);
      await fill(store, A, 1, 2);
      expect(await store.replayAfter(S1, 'nosuchstreamnosuchstre', 0)).toEqual(UNKNOWN);
    });

    it('append without createStream registers the stream', async () => {
      const { S1, A } = keys();
      const store = await makeStore();
      await fill(store, A, 1, 2);
      expect(await store.replayAfter(S1, A.streamId, 0)).toEqual(ok(frames(A, 1, 2), 2));
    });

    it('createStream twice keeps the frames already stored', async () => {
      const { S1, A } = keys();
      const store = await makeStore();
      await store.createStream(A);
      await fill(store, A, 1, 2);
      await store.createStream(A);
      expect(await store.replayAfter(S1, A.streamId, 0)).toEqual(ok(frames(A, 1, 2), 2));
    });

    it('keeps streams apart: each replays only its own frames', async () => {
      const { S1, A, B } = keys();
      const store = await makeStore();
      for (let seq = 1; seq <= 4; seq++) {
        await store.append(A, seq, frame(A, seq), false);
        await store.append(B, seq, frame(B, seq), false);
      }
      expect(await store.replayAfter(S1, A.streamId, 1)).toEqual(ok(frames(A, 2, 4), 4));
      expect(await store.replayAfter(S1, B.streamId, 3)).toEqual(ok([frame(B, 4)], 4));
    });

    it('a final append sets complete, whether the final frame is replayed or lies before the cursor', async () => {
      const { S1, A } = keys();
      const store = await makeStore();
      await store.createStream(A);
      await fill(store, A, 1, 2);
      expect(await store.replayAfter(S1, A.streamId, 0)).toMatchObject({ ok: true, complete: false });
      await store.append(A, 3, frame(A, 3), true);
      expect(await store.replayAfter(S1, A.streamId, 1)).toEqual(ok(frames(A, 2, 3), 3, true));
      expect(await store.replayAfter(S1, A.streamId, 3)).toEqual(ok([], 3, true));
    });

    it('replay returns a copy: mutating it does not change the store', async () => {
      const { S1, A } = keys();
      const store = await makeStore();
      await fill(store, A, 1, 3);
      const first = await store.replayAfter(S1, A.streamId, 0);
      if (!first.ok) throw new Error('expected ok');
      first.frames.length = 0;
      expect(await store.replayAfter(S1, A.streamId, 0)).toEqual(ok(frames(A, 1, 3), 3));
    });

    it('stores frames with any content: unicode, newlines inside JSON strings, large frames', async () => {
      const { S1, A } = keys();
      const store = await makeStore();
      const odd = [
        'id: x.1\ndata: {"t":"héllo ✓ 𝄞 \\n \\u0000"}\n\n',
        `id: x.2\ndata: ${JSON.stringify({ big: 'x'.repeat(256 * 1024) })}\n\n`,
        'id: x.3\ndata: {"s":"a b  c"}\n\n',
      ];
      for (let i = 0; i < odd.length; i++) await store.append(A, i + 1, odd[i] as string, false);
      expect(await store.replayAfter(S1, A.streamId, 0)).toEqual(ok(odd, 3));
    });

    it('per-stream cap: the newest N frames replay, the oldest kept boundary resumes, older cursors are evicted', async () => {
      const { S1, A, B } = keys();
      const store = await makeStore({ maxEventsPerStream: 3 });
      await store.createStream(A);
      await fill(store, A, 1, 5);
      await fill(store, B, 1, 2);
      // Kept: 3, 4, 5. Cursor 2 is the frame just before the oldest kept one: a complete replay.
      expect(await store.replayAfter(S1, A.streamId, 2)).toEqual(ok(frames(A, 3, 5), 5));
      expect(await store.replayAfter(S1, A.streamId, 4)).toEqual(ok([frame(A, 5)], 5));
      // Frame 2 is gone: resuming after 1 (or 0) would be a silent partial replay.
      expect(await store.replayAfter(S1, A.streamId, 1)).toEqual(EVICTED);
      expect(await store.replayAfter(S1, A.streamId, 0)).toEqual(EVICTED);
      // Each stream is capped on its own.
      expect(await store.replayAfter(S1, B.streamId, 0)).toEqual(ok(frames(B, 1, 2), 2));
    });

    it('per-stream cap: a completed stream keeps its final frame and says complete', async () => {
      const { S1, A } = keys();
      const store = await makeStore({ maxEventsPerStream: 2 });
      await fill(store, A, 1, 6, 6);
      expect(await store.replayAfter(S1, A.streamId, 4)).toEqual(ok(frames(A, 5, 6), 6, true));
      // A store may hand back the final frame with `evicted` (the engine answers its request with an error).
      expect(await store.replayAfter(S1, A.streamId, 3)).toMatchObject(EVICTED);
    });

    it("deleteSession drops the session's streams (cursors become unknown) and only those", async () => {
      const { S1, S2, A, B, C } = keys();
      const store = await makeStore();
      await store.createStream(A);
      await fill(store, A, 1, 3);
      await fill(store, B, 1, 2);
      await fill(store, C, 1, 4);
      await store.deleteSession(S1);
      expect(await store.replayAfter(S1, A.streamId, 0)).toEqual(UNKNOWN);
      expect(await store.replayAfter(S1, B.streamId, 2)).toEqual(UNKNOWN);
      expect(await store.replayAfter(S2, C.streamId, 0)).toEqual(ok(frames(C, 1, 4), 4));
    });

    it('deleteSession of an unknown session is a no-op', async () => {
      const { S1, A } = keys();
      const store = await makeStore();
      await fill(store, A, 1, 2);
      await store.deleteSession('nobody-at-all');
      expect(await store.replayAfter(S1, A.streamId, 0)).toEqual(ok(frames(A, 1, 2), 2));
    });
  });
}

/** What a subscription delivered, and how it ended. */
export interface Recorded {
  frames: Array<{ frame: string; seq: number; final: boolean }>;
  ended: Array<'deleted' | 'error' | `closed ${number}`>;
}

/** Waits until `check` passes (retrying on assertion errors), up to `timeoutMs`. */
async function eventually(check: () => void, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      check();
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 5));
    }
  }
}

/**
 * The live-tail half of the contract, for stores with `subscribe` (and `closeTails`): every frame
 * after the cursor, in order, once, across the switch from stored to live, until the final frame
 * or the owner's close.
 */
export function subscribeContract(name: string, makeStore: MakeStore): void {
  describe(`${name}: the EventStore subscribe contract`, () => {
    const record = (): Recorded & { listener: Parameters<NonNullable<EventStore['subscribe']>>[2] } => {
      const r: Recorded = { frames: [], ended: [] };
      return {
        ...r,
        listener: {
          frame: (f, seq, final) => r.frames.push({ frame: f, seq, final }),
          end: (reason) => r.ended.push(reason),
          closed: (retryMs) => r.ended.push(`closed ${retryMs}`),
        },
      };
    };

    it('delivers stored frames after the cursor, then live ones, in order and once, and stops at the final frame', async () => {
      const { A } = keys();
      const store = await makeStore();
      const other = await makeStore();
      await store.createStream(A);
      await fill(store, A, 1, 3);
      const rec = record();
      const sub = await other.subscribe!(A, 1, rec.listener);
      await fill(store, A, 4, 6, 6);
      // After the final frame: never delivered (a store may refuse to store it at all).
      await Promise.resolve(store.append(A, 7, frame(A, 7), false)).catch(() => {});
      await eventually(() => expect(rec.frames.map((f) => f.seq)).toEqual([2, 3, 4, 5, 6]));
      expect(rec.frames.map((f) => f.frame)).toEqual(frames(A, 2, 6));
      expect(rec.frames.map((f) => f.final)).toEqual([false, false, false, false, true]);
      expect(rec.ended).toEqual([]);
      sub.cancel();
    });

    it('delivers frames stored after the cursor even when nothing more is appended (the final one landed before the subscription)', async () => {
      const { A } = keys();
      const store = await makeStore();
      const other = await makeStore();
      await fill(store, A, 1, 3, 3);
      const rec = record();
      await other.subscribe!(A, 1, rec.listener);
      await eventually(() =>
        expect(rec.frames.map((f) => [f.seq, f.final])).toEqual([
          [2, false],
          [3, true],
        ]),
      );
    });

    it('no gap and no duplicate while frames are appended as the subscription starts', async () => {
      const { A } = keys();
      const store = await makeStore();
      const other = await makeStore();
      await store.createStream(A);
      const rec = record();
      // Append concurrently with subscribing: the race the store must close.
      const writing = fill(store, A, 1, 200, 200);
      const sub = await other.subscribe!(A, 0, rec.listener);
      await writing;
      await eventually(() => expect(rec.frames.length).toBe(200));
      expect(rec.frames.map((f) => f.seq)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
      sub.cancel();
    });

    it('cancel stops delivery', async () => {
      const { A } = keys();
      const store = await makeStore();
      const other = await makeStore();
      await store.createStream(A);
      const rec = record();
      const sub = await other.subscribe!(A, 0, rec.listener);
      await fill(store, A, 1, 2);
      await eventually(() => expect(rec.frames.length).toBe(2));
      sub.cancel();
      sub.cancel();
      await fill(store, A, 3, 5, 5);
      // A fresh subscriber sees frame 5, so the cancelled one had every chance to.
      const after = record();
      const probe = await other.subscribe!(A, 4, after.listener);
      await eventually(() => expect(after.frames.map((f) => f.seq)).toEqual([5]));
      expect(rec.frames.map((f) => f.seq)).toEqual([1, 2]);
      probe.cancel();
    });

    it("closeTails ends a tail with the owner's retry hint once it delivered the frames before the close", async () => {
      const { A } = keys();
      const store = await makeStore();
      const other = await makeStore();
      await fill(store, A, 1, 2);
      const rec = record();
      await other.subscribe!(A, 2, rec.listener);
      // Appended and closed back to back, as a tool does: the tail still gets 3 and 4 first.
      const appends = fill(store, A, 3, 4);
      await appends;
      await store.closeTails!(A, 4, 1234);
      await fill(store, A, 5, 5);
      await eventually(() => expect(rec.ended).toEqual(['closed 1234']));
      expect(rec.frames.map((f) => f.seq)).toEqual([3, 4]);
    });

    it('closeTails at or before where a tail started is the close its client resumed from: ignored', async () => {
      const { A } = keys();
      const store = await makeStore();
      const other = await makeStore();
      await fill(store, A, 1, 3);
      const rec = record();
      await other.subscribe!(A, 3, rec.listener);
      await store.closeTails!(A, 3, 50);
      await fill(store, A, 4, 4, 4);
      await eventually(() => expect(rec.frames.map((f) => [f.seq, f.final])).toEqual([[4, true]]));
      expect(rec.ended).toEqual([]);
    });

    it('deleteSession ends the subscriptions of its streams with "deleted"', async () => {
      const { S1, A } = keys();
      const store = await makeStore();
      const other = await makeStore();
      await store.createStream(A);
      const rec = record();
      await other.subscribe!(A, 0, rec.listener);
      await fill(store, A, 1, 1);
      await eventually(() => expect(rec.frames.length).toBe(1));
      await store.deleteSession(S1);
      await eventually(() => expect(rec.ended).toEqual(['deleted']));
    });
  });
}
