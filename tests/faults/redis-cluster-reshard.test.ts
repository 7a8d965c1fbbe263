/**
 * A Redis Cluster resharded while calls stream: three express-example instances on the testbed's
 * 3-master cluster behind the round-robin proxy, SDK v1, SDK v2 (both negotiations) and raw chaos
 * clients calling long_task with closeEvery, while
 *
 * - the slots of the live sessions are moved to another master one by one, a key at a time with a
 *   pause between keys (`CLUSTER SETSLOT … MIGRATING/IMPORTING`, `MIGRATE … KEYS`, `SETSLOT NODE`):
 *   the master answers ASK for a key it gave away and TRYAGAIN for a script whose keys are split,
 *   and the sharded subscriptions of the slot move with it;
 * - then `redis-cli --cluster reshard` moves a thousand slots of one master to another in one go.
 *
 * Nothing may be lost, repeated or refused: every call completes with every step once and in
 * order, raw calls too (none sent again after a 502/503), no 5xx, no 404, no session restored on
 * another instance (forwarding), and every session takes another call after.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { stepsReached, type OutageKind } from '@mcp-kit/testbed/clients';
import type { LongTask } from '@mcp-kit/testbed/long-task';
import { redisCommand } from '@mcp-kit/testbed/redis-command';
import type { TestRedisCluster } from '@mcp-kit/testbed/redis-cluster';
import { rawCallAgain } from '../support/raw-chaos.js';
import { RedisClusterRun } from '../support/redis-cluster-run.js';

const LONG = process.env.LONG === '1';
const CLIENTS: Partial<Record<OutageKind, number>> = LONG
  ? { v1: 18, 'v2-legacy': 9, 'v2-auto': 9 }
  : { v1: 6, 'v2-legacy': 3, 'v2-auto': 3 };
const RAW_CLIENTS = LONG ? 9 : 3;
const ENV = { HEARTBEAT_MS: '500', RETRY_MS: '200', DRAIN_MS: '10000' };
const TASK: LongTask = { steps: 60, intervalMs: 100, closeEvery: 5, retryMs: 300 };
/** The pause between two keys of a slot on the move: a script meets ASK or TRYAGAIN meanwhile. */
const BETWEEN_KEYS_MS = 30;

let run = new RedisClusterRun();

/** The redirections and refusals every node answered so far (`INFO errorstats`): ASK, TRYAGAIN, MOVED. */
async function redirections(redis: TestRedisCluster): Promise<Record<'ASK' | 'TRYAGAIN' | 'MOVED', number>> {
  const total = { ASK: 0, TRYAGAIN: 0, MOVED: 0 };
  for (const node of redis.nodes) {
    const info = String(await redisCommand(node.port, 'INFO', 'errorstats'));
    for (const name of Object.keys(total) as Array<keyof typeof total>)
      total[name] += Number(new RegExp(`errorstat_${name}:count=(\\d+)`).exec(info)?.[1] ?? 0);
  }
  return total;
}

afterEach(async () => {
  await run.close();
  run = new RedisClusterRun();
});

describe('a Redis Cluster resharded while calls stream', () => {
  it("the live sessions' slots moved one by one, then a thousand slots by redis-cli --cluster reshard: 0 lost, 0 repeated, 0 refused", async () => {
    await run.start(ENV, CLIENTS, RAW_CLIENTS);
    const redis = run.redis!;
    const calls = run.calls(TASK, 'redis cluster resharded');
    await stepsReached(run.clients, 5);
    const from = run.proxy!.log.length;
    const outputFrom = run.instances.map((i) => i.output.length);
    const masters = await redis.masters();
    const slots = [...new Map((await run.sessionSlots()).map((s) => [s.slot, s])).values()];
    let keys = 0;
    const before = await redirections(redis);
    const started = Date.now();
    for (const { slot, master } of slots) {
      // To the next master, whichever serves the slot now.
      const to = masters[(masters.findIndex((m) => m.port === master.port) + 1) % masters.length]!;
      keys += await redis.migrateSlot(slot, to, { batch: 1, betweenBatches: () => new Promise((r) => setTimeout(r, BETWEEN_KEYS_MS)) });
    }
    const oneByOneMs = Date.now() - started;
    const during = await redirections(redis);
    // What the clients met while the slots moved: the scenario did what it says.
    expect(during.ASK + during.TRYAGAIN - before.ASK - before.TRYAGAIN, 'ASK and TRYAGAIN answered while the slots moved').toBeGreaterThan(
      0,
    );
    for (const { slot, master } of slots) expect((await redis.masterOf(slot)).port, `slot ${slot}`).not.toBe(master.port);
    const bulkAt = Date.now();
    await redis.reshard(masters[0]!, masters[1]!, 1_000);
    await redis.settled();
    console.log(
      `[redis cluster resharded] ${slots.length} slots of live sessions moved one by one (${keys} keys, ${oneByOneMs} ms; ` +
        `${during.ASK - before.ASK} ASK, ${during.TRYAGAIN - before.TRYAGAIN} TRYAGAIN, ${during.MOVED - before.MOVED} MOVED answered), ` +
        `then 1000 slots by redis-cli --cluster reshard in ${Date.now() - bulkAt} ms`,
    );
    const outcomes = await calls.sdk;
    await calls.raw;
    run.audit(outcomes, TASK, { from, outputFrom, label: 'redis cluster resharded', lostEventsAllowed: false, unavailableAllowed: false });
    for (const c of run.clients)
      expect(await c.call({ steps: 3, intervalMs: 10 }), c.name).toEqual([{ type: 'text', text: 'completed 3 steps' }]);
    for (const c of run.raw) expect(await rawCallAgain(c), c.name).toEqual([{ type: 'text', text: 'completed 3 steps' }]);
  }, 180_000);
});
