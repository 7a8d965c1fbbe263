/**
 * The fault suites start the built example apps as processes, and `npm test` runs some of them a
 * second time on ioredis 6 (MCP_KIT_IOREDIS=6, vitest.config.ts): the apps then load ioredis 6
 * through scripts/ioredis6.mjs in NODE_OPTIONS. Checked here on the wire: every connection an
 * instance opens speaks RESP3 on ioredis 6 (its default, `HELLO 3`) and RESP2 on ioredis 5.
 */
import { afterEach, expect, it } from 'vitest';
import { instance } from '@mcp-kit/testbed/cluster';
import { freePort } from '@mcp-kit/testbed/processes';
import { startRedis } from '@mcp-kit/testbed/redis';
import { redisCommand } from '@mcp-kit/testbed/redis-command';

const started: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const stop of started.splice(0).reverse()) await stop();
});

it('an instance talks to Redis with the ioredis MCP_KIT_IOREDIS names (5 when unset)', async () => {
  const redis = await startRedis();
  started.push(() => redis.stop());
  // A shared cluster, so that the bus subscriber connects at startup too.
  const a = instance('A', await freePort(), { REDIS_URL: redis.url, CLUSTER: 'shared', LIVE_PAGE: '0' });
  started.push(() => a.stop('SIGKILL'));
  await a.start();
  const resp = process.env.MCP_KIT_IOREDIS === '6' ? 3 : 2;
  const list = String(await redisCommand(redis.port, 'CLIENT', 'LIST'));
  const kit = list.split('\n').filter((line) => /\bname=mcp-kit/.test(line));
  expect(kit.map((line) => /\bname=(\S+)/.exec(line)![1]).sort()).toEqual(['mcp-kit', 'mcp-kit-bus', 'mcp-kit-task-signals']);
  for (const line of kit) expect(line).toMatch(new RegExp(`\\bresp=${resp}\\b`));
});
