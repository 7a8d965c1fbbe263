// ClusterRecords: a session's record in the cluster lives at least `sessionIdleTtlMs` past the
// session's last activity, whether this instance still holds the session or let it go, for one
// batch of `keepRecords` per interval, not one command per request.
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { EventStore, SessionCluster, SessionDirectory } from '../src/index.js';
import type { CopyRules } from '../src/session/copy-rules.js';
import { resolveOptions } from '../src/options.js';
import { ClusterRecords } from '../src/session/records.js';
import { Session } from '../src/session/session.js';

const TTL = 10 * 60_000;
const EVERY = 60_000; // a quarter of the TTL, at most a minute
const SLACK = TTL / 100;

function setUp() {
  // One clock for the saves and the test: a millisecond passing between them must not make a save count as fresh.
  const now = Date.now();
  vi.spyOn(Date, 'now').mockReturnValue(now);
  const kept: string[][] = [];
  const saved: string[] = [];
  const directory = {
    open: async () => {},
    end: () => true,
    saveRecord: async (sessionId: string) => void saved.push(sessionId),
    keepRecords: async (ids: string[]) => void kept.push(ids),
  } satisfies SessionDirectory;
  const cluster = {
    directory,
    owners: { lookupOwner: async () => undefined, forward: async () => {}, takeOver: async () => undefined },
  } satisfies SessionCluster;
  const rules: CopyRules = { directory, restoresAnywhere: true, recordFirst: false, endsSession: () => true, copyMade: () => {} };
  const eventStore = {
    createStream() {},
    append() {},
    replayAfter: () => ({ ok: false, reason: 'unknown' }),
    deleteSession() {},
  } as unknown as EventStore;
  const options = resolveOptions({
    server: () => ({}) as never,
    cluster,
    eventStore,
    sessionIdleTtlMs: TTL,
    tasks: false,
    onError: (e) => {
      throw e;
    },
  });
  const records = new ClusterRecords(options, rules);
  /** A session whose handshake is done (its record saved now), last active at `lastActive`. */
  const session = (id: string, lastActive: number) => {
    const s = new Session(id, undefined, options, new Set(), () => {});
    s.server.record.initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: {} };
    s.protocolVersion = '2025-11-25';
    records.track(s);
    void s.server.record.changed?.();
    s.lastActive = lastActive;
    return s;
  };
  return { records, session, kept, saved };
}

describe('ClusterRecords.keepAlive', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('keeps alive, once per interval, the records of sessions active since the last batch; not one saved about when it was last active', async () => {
    const { records, session, kept, saved } = setUp();
    const start = Date.now();
    // Saved at its handshake; its client's next request (notifications/initialized) comes right after.
    const fresh = session('fresh', start + 5);
    const active = session('active', start);
    const idle = session('idle', start);
    await Promise.resolve();
    expect(saved).toEqual(['fresh', 'active', 'idle']);
    // Active again past the slack; the idle one is not.
    active.lastActive = start + SLACK + 1;
    idle.lastActive = start - 1;
    // Not before the interval: one batch per interval, however often the registry sweeps.
    records.keepAlive([fresh, active, idle], start + EVERY - 1);
    expect(kept).toEqual([]);
    records.keepAlive([fresh, active, idle], start + EVERY);
    expect(kept).toEqual([['active']]);
    // Kept alive then: not again at the next interval unless active since.
    records.keepAlive([fresh, active, idle], start + 2 * EVERY);
    expect(kept).toEqual([['active']]);
    active.lastActive = start + 2 * EVERY + SLACK + 1;
    records.keepAlive([fresh, active, idle], start + 3 * EVERY);
    expect(kept).toEqual([['active'], ['active']]);
  });

  it('keeps alive, with the others, the record of a session let go of after it was active; and every interval that of a connected one', async () => {
    const { records, session, kept } = setUp();
    const start = Date.now();
    const letGo = session('let-go', start);
    const letGoFresh = session('let-go-fresh', start);
    const connected = session('connected', start - EVERY);
    await Promise.resolve();
    letGo.lastActive = start + SLACK + 1;
    // Let go of by this instance (a cap, hibernation): no longer among those it holds.
    records.copyLetGo(letGo);
    records.copyLetGo(letGoFresh);
    connected.openConnections = 1;
    records.keepAlive([connected], start + EVERY);
    expect(kept).toEqual([['let-go', 'connected']]);
    records.keepAlive([connected], start + 2 * EVERY);
    expect(kept).toEqual([['let-go', 'connected'], ['connected']]);
  });
});
