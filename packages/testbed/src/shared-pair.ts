/**
 * Two express-example instances in a shared cluster on one real redis-server: A reaches Redis
 * through a fault proxy (commands failed on demand, subscribers cut or black-holed), B directly.
 * Everything started is pushed onto `started`, for the test's afterEach to stop in reverse order.
 */
import { instance, type Instance } from './cluster.js';
import { startRedis, type TestRedis } from './redis.js';
import { freePort } from './processes.js';
import { startRespFaultProxy, type RespFaultProxy } from './resp-faults.js';

export const SHARED_PAIR_ENV = { CLUSTER: 'shared', HEARTBEAT_MS: '300', RETRY_MS: '100', LIVE_PAGE: '0' };

export async function startSharedPair(
  started: Array<() => Promise<void>>,
  env: Record<string, string> = SHARED_PAIR_ENV,
): Promise<{ redis: TestRedis; faults: RespFaultProxy; a: Instance; b: Instance }> {
  const redis = await startRedis();
  started.push(() => redis.stop());
  const faults = await startRespFaultProxy(redis.port);
  started.push(() => faults.close());
  const a = instance('A', await freePort(), { ...env, REDIS_URL: faults.url });
  const b = instance('B', await freePort(), { ...env, REDIS_URL: redis.url });
  started.push(
    () => a.stop('SIGKILL'),
    () => b.stop('SIGKILL'),
  );
  await Promise.all([a.start(), b.start()]);
  return { redis, faults, a, b };
}
