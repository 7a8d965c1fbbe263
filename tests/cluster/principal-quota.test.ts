/**
 * What bounds one client's sessions in a deployment, now that an instance's caps only bound what it
 * holds in memory: the cluster's `maxSessionsPerPrincipal` (`CLUSTER_MAX_SESSIONS_PER_PRINCIPAL`),
 * counted in Redis across instances. Two built express-example instances on one redis-server, a
 * quota of 4 sessions per client (here every client is 127.0.0.1: one holder), each instance holding
 * at most 2 in memory: the fifth `initialize`, on either instance, gets 429 with `Retry-After` and a
 * JSON-RPC error, while the four sessions go on; one deleted, the next `initialize` is taken.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type Instance, type TestCluster } from '@mcp-kit/testbed/cluster';
import { callTool, initializeRequest } from '@mcp-kit/testbed/requests';
import { errorOf, http, openSession } from '@mcp-kit/testbed/fetch-client';

describe.each(['forward', 'shared'] as const)('a quota of sessions per client in a %s cluster', (mode) => {
  let cluster: TestCluster;
  let a: Instance;
  let b: Instance;

  beforeAll(async () => {
    cluster = await startCluster(2, { CLUSTER: mode, CLUSTER_MAX_SESSIONS_PER_PRINCIPAL: '4', MAX_SESSIONS: '2', LIVE_PAGE: '0' });
    [a, b] = cluster.instances as [Instance, Instance];
  }, 60_000);

  afterAll(async () => {
    await cluster?.close();
  });

  it('past the quota an initialize gets 429 on any instance; the sessions it has go on; one deleted makes room', async () => {
    const sessions = [];
    for (const on of [a, b, a, b]) sessions.push(await openSession(http(on.url)));
    for (const on of [a, b]) {
      const refused = await errorOf(await http(on.url).post(initializeRequest(9)));
      expect(refused.status).toBe(429);
      expect(refused.message).toMatch(/^Too Many Requests: this client has opened as many sessions as it may/);
      expect(refused.body.id).toBe(9);
    }
    const again = await http(b.url).post(initializeRequest(9));
    expect(Number(again.headers.get('retry-after'))).toBeGreaterThan(200);
    await again.text();
    // Each instance holds two of them at most: the others were let go of, and every one answers.
    for (const [i, { headers }] of sessions.entries()) {
      const answer = await http([a, b][i % 2]!.url).post(callTool(10 + i, 'test_simple_text'), headers);
      expect(answer.status).toBe(200);
      expect(await answer.text()).toContain('This is a simple text response for testing.');
    }
    expect((await http(a.url).del(sessions[0]!.headers)).status).toBe(200);
    await openSession(http(b.url));
    expect((await http(a.url).post(initializeRequest(9))).status).toBe(429);
  }, 60_000);
});
