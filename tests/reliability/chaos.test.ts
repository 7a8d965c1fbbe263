/**
 * Randomized disconnect chaos, against every adapter: a client cuts its connections at random
 * byte offsets (sometimes before the response, sometimes inside the priming event), resumes with
 * the last id it saw, while the tool closes streams itself (`closeEvery`). Every call must end
 * with every event exactly once, in order, and the result exactly once.
 *
 * Each run first makes one call whose cuts are forced (each kind once, and a server close), so that
 * no seed can skip what the test is about; the random cycles follow.
 *
 * CI runs a sample; `pnpm test:chaos` runs ≥ 1,000 cycles per adapter and store. `SEED=` replays.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryEventStore, type EventStore } from '@mcp-kit/core';
import { adapters, type ServerUnderTest } from '@mcp-kit/testbed/adapters';
import { RawSession, splitId, type OpenOptions, type RawSse } from '@mcp-kit/testbed/raw-client';
import { callTool as toolCall } from '@mcp-kit/testbed/requests';
import { QueuedStore, ServerCounter } from '@mcp-kit/testbed/probes';
import { count, LONG, Rng, seedFor } from '@mcp-kit/testbed/random';

const CYCLES = count(50, 1_000, 'CHAOS_CYCLES');
const ASYNC_CYCLES = count(20, 1_000, 'CHAOS_CYCLES');
const LANES = 8;
/** A call that needs more connections than this is stuck, not unlucky. */
const MAX_CONNECTIONS = 400;

interface Tally {
  cycles: number;
  connections: number;
  cuts: number;
  cutsBeforeResponse: number;
  cutsInPriming: number;
  /** Cuts that landed past the priming event, inside the events. */
  cutsMidStream: number;
  serverCloses: number;
  orphanedPosts: number;
  events: number;
}

type Cut = OpenOptions & { kind: 'none' | 'before-response' | 'in-priming' | 'mid-stream' };

/** Where to cut the next connection, if at all. */
function plan(rng: Rng, expectedBytes: number): Cut {
  const r = rng.next();
  if (r < 0.45) return { kind: 'none' };
  if (r < 0.55) return { kind: 'before-response', abortBeforeResponse: true };
  // A priming event is about 60 bytes: these cuts land before it is complete.
  if (r < 0.65) return { kind: 'in-priming', abortAtByte: rng.int(0, 60) };
  return { kind: 'mid-stream', abortAtByte: rng.int(0, Math.max(1, expectedBytes)) };
}

/** A call whose first connections are cut as given, not as drawn. */
interface Forced {
  args: { steps: number; intervalMs: number; closeEvery: number; retryMs: number };
  cuts: Cut[];
}

/**
 * The first call of every run: each kind of cut and a server close, whatever the seed. A priming
 * event is 46 bytes here (`id: <22 chars>.0`, `retry: 0`, `data: `), an event about 150.
 */
const FORCED: Forced = {
  args: { steps: 4, intervalMs: 5, closeEvery: 1, retryMs: 0 },
  cuts: [
    // The POST, cut before its answer: no cursor, so the call is asked again under a new id…
    { kind: 'before-response', abortBeforeResponse: true },
    // …and again, cut inside its priming event: still no cursor.
    { kind: 'in-priming', abortAtByte: 20 },
    // The third POST is read whole: the tool closes it after step 1 (closeEvery 1, 4 steps).
    { kind: 'none' },
    // The resume from step 1 is cut inside the next event (priming, then step 2 at least).
    { kind: 'mid-stream', abortAtByte: 100 },
  ],
};

/**
 * One tool call driven to its result through cuts and resumes. Returns the data events it got, in
 * the order they arrived, after checking every connection on the way.
 */
async function chaosCall(session: RawSession, rng: Rng, id: number, tally: Tally, forced?: Forced): Promise<void> {
  const steps = forced?.args.steps ?? rng.int(1, 40);
  const closeEvery = forced ? forced.args.closeEvery : rng.chance(0.6) ? rng.int(1, Math.max(1, Math.ceil(steps / 2))) : undefined;
  const intervalMs = forced?.args.intervalMs ?? rng.pick([0, 0, 0, 1, 2, 5]);
  const retryMs = forced?.args.retryMs ?? rng.int(0, 50);
  const args = { steps, intervalMs, retryMs, ...(closeEvery ? { closeEvery } : {}) };
  const where = `call ${id} ${JSON.stringify(args)} in session ${session.sessionId}`;
  const expectedBytes = steps * 170 + 300;

  let callId = id;
  let token: string | undefined;
  let cursor: string | undefined;
  const got: Array<{ id: string; message: any }> = [];
  for (let connection = 0; ; connection++) {
    if (connection >= MAX_CONNECTIONS) throw new Error(`${where}: no result after ${MAX_CONNECTIONS} connections`);
    const cut = forced?.cuts[connection] ?? plan(rng, expectedBytes);
    tally.connections++;
    let stream: RawSse;
    if (cursor === undefined) {
      if (connection > 0) {
        // The POST was cut before its priming event: there is no cursor to resume from, so the
        // call is lost to this client. It asks again under a new id; the old one must not leak in.
        tally.orphanedPosts++;
        callId += 1_000_000;
      }
      stream = await session.postSse(toolCall(callId, 'long_task', args), cut);
    } else {
      stream = await session.get(cursor, cut);
    }
    const how = await stream.end(30_000);
    if (how === 'aborted') {
      tally.cuts++;
      if (cut.kind === 'before-response') tally.cutsBeforeResponse++;
      if (cut.kind === 'in-priming') tally.cutsInPriming++;
      if (cut.kind === 'mid-stream' && stream.blocks.length > 0) tally.cutsMidStream++;
    } else {
      expect(how, `${where}: connection ${connection} failed`).toBe('server');
    }
    if (stream.status !== 0) expect(stream.status, `${where}: ${stream.raw}`).toBe(200);
    if (stream.blocks.length === 0) continue;

    // Every connection starts with a priming event: the stream's cursor (a resume repeats the one sent).
    const priming = stream.blocks[0]!;
    expect(priming.data, `${where}: first block is not a priming event`).toBe('');
    const primed = splitId(priming.id!);
    if (token === undefined) {
      token = primed.token;
      expect(primed.seq).toBe(0);
    } else {
      expect(priming.id, `${where}: resumed stream primed with another cursor`).toBe(cursor);
    }
    cursor = priming.id;

    let sawResult = false;
    for (const block of stream.blocks.slice(1)) {
      if (block.data === undefined) {
        // Only a close hint may stand between events: `retry:` written right before the server ends.
        expect(block.retry, `${where}: unexpected block ${JSON.stringify(block.raw)}`).toBeTypeOf('number');
        continue;
      }
      expect(sawResult, `${where}: an event after the result`).toBe(false);
      const { token: t, seq } = splitId(block.id!);
      expect(t, `${where}: event of another stream`).toBe(token);
      expect(seq, `${where}: lost or duplicated event (got seq ${seq} after ${cursor})`).toBe(splitId(cursor!).seq + 1);
      cursor = block.id;
      const message = JSON.parse(block.data);
      got.push({ id: block.id!, message });
      if (message.id !== undefined) sawResult = true;
    }
    if (how === 'server') {
      if (sawResult) {
        expect(stream.partial, `${where}: bytes after the result`).toBe('');
        break;
      }
      // The server ended the stream before the result: only closeSSEStream does that, with its hint.
      tally.serverCloses++;
      expect(stream.blocks.at(-1)!.retry, `${where}: server ended the stream without a retry hint; raw:\n${stream.raw}`).toBe(retryMs);
      expect(closeEvery, `${where}: server closed a stream the tool never asked to close`).toBeDefined();
    } else if (sawResult) {
      break;
    }
  }

  tally.events += got.length;
  const logs = got.filter((e) => e.message.method === 'notifications/message').map((e) => e.message.params.data.step);
  expect(logs, where).toEqual(Array.from({ length: steps }, (_, i) => i + 1));
  const results = got.filter((e) => e.message.id !== undefined);
  expect(
    results.map((r) => r.message.id),
    where,
  ).toEqual([callId]);
  expect(results[0]!.message.result.content[0].text).toBe(`completed ${steps} steps`);
  expect(got.at(-1)).toBe(results[0]);
}

const emptyTally = (): Tally => ({
  cycles: 0,
  connections: 0,
  cuts: 0,
  cutsBeforeResponse: 0,
  cutsInPriming: 0,
  cutsMidStream: 0,
  serverCloses: 0,
  orphanedPosts: 0,
  events: 0,
});

/** The forced call (on lane 0, before its random cycles), then the random cycles on every lane. */
async function runChaos(sut: ServerUnderTest, seed: number, cycles: number): Promise<{ tally: Tally; forced: Tally }> {
  const tally = emptyTally();
  const forced = emptyTally();
  const root = new Rng(seed);
  let next = 0;
  const lanes = Array.from({ length: LANES }, async (_, lane) => {
    const rng = root.fork();
    const session = await RawSession.open(sut.url);
    let id = lane * 100_000;
    if (lane === 0) {
      await chaosCall(session, rng, ++id, forced, FORCED);
      forced.cycles++;
    }
    while (next < cycles) {
      next++;
      await chaosCall(session, rng, ++id, tally);
      tally.cycles++;
    }
    expect((await session.del()).status).toBe(200);
  });
  await Promise.all(lanes);
  return { tally, forced };
}

describe.each(adapters)('chaos: $name', (adapter) => {
  let sut: ServerUnderTest | undefined;
  afterEach(async () => {
    await sut?.close();
    sut = undefined;
  });

  // Custom stores and probes live in the test process; `next start` runs in its own (the default store).
  const variants: Array<{ store: string; cycles: number; make: () => EventStore; stats: (s: EventStore) => { streams: number } }> = [
    { store: 'memory store', cycles: CYCLES, make: () => new MemoryEventStore(), stats: (s) => (s as MemoryEventStore).stats() },
    ...(adapter.inProcess
      ? [
          {
            store: 'asynchronous ordered store',
            cycles: ASYNC_CYCLES,
            make: () => new QueuedStore(),
            stats: (s: EventStore) => (s as QueuedStore).inner.stats(),
          },
        ]
      : []),
  ];

  for (const variant of variants) {
    it(
      `${variant.cycles} cycles of random cuts, resumes and server closes with the ${variant.store}: 0 lost, 0 duplicated, order kept, the result once`,
      async () => {
        const seed = seedFor(`chaos ${adapter.name} ${variant.store}`);
        const eventStore = variant.make();
        const servers = new ServerCounter();
        sut = await adapter.start(adapter.inProcess ? { eventStore, server: servers.factory(), retryMs: 0 } : { retryMs: 0 });
        const started = performance.now();
        const { tally, forced } = await runChaos(sut, seed, variant.cycles);
        const ms = Math.round(performance.now() - started);
        console.log(
          `[chaos ${adapter.name} ${variant.store}] forced ${JSON.stringify(forced)}, random ${JSON.stringify(tally)} in ${ms} ms`,
        );
        expect(tally.cycles).toBeGreaterThanOrEqual(variant.cycles);
        // The chaos really happened. Every kind of cut and a server close, in the forced call
        // whatever the seed; many cuts in the random cycles.
        expect(forced.cutsBeforeResponse).toBeGreaterThan(0);
        expect(forced.cutsInPriming).toBeGreaterThan(0);
        expect(forced.orphanedPosts).toBeGreaterThan(0);
        expect(forced.serverCloses).toBeGreaterThan(0);
        expect(forced.cutsMidStream).toBeGreaterThan(0);
        expect(tally.cuts).toBeGreaterThan(tally.cycles / 4);
        expect(sut.errors).toEqual([]);
        if (!adapter.inProcess) return;
        // Nothing left behind: every session closed its server and dropped its stored events.
        await servers.closedAtLeast(LANES);
        expect(servers.closed).toBe(servers.created);
        await (eventStore as Partial<QueuedStore>).drained?.();
        expect(variant.stats(eventStore).streams).toBe(0);
      },
      LONG ? 1_800_000 : 60_000,
    );
  }
});
