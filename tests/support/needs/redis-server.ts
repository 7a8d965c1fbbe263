/**
 * The `redis` project's global setup: a real `redis-server` is installed (its tests start one on a
 * free port each), or the run fails at once with how to install it — never a skip.
 */
import type { TestProject } from 'vitest/node';
import { redisServerBinary } from '@mcp-kit/testbed/redis';

export default function needsRedisServer(project: TestProject): void {
  try {
    redisServerBinary();
  } catch (error) {
    throw new Error(`The ${project.name} project starts real redis-servers. ${(error as Error).message}`);
  }
}
