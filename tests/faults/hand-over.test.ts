/**
 * Hand-overs between a draining owner and its peer (forwarding mode). A client's request for a
 * session whose call still runs on the draining instance goes to a peer (nothing new starts on a
 * draining instance), which forwards it back to the owner as the session's owner: served there.
 * Around the moment the call ends and the drain lets the session go, the same request may find the
 * session gone from the owner; it must still be answered (restored by the peer), never a 502.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startCluster, type Instance, type TestCluster } from '@mcp-kit/testbed/cluster';
import { callTool } from '@mcp-kit/testbed/requests';
import { http, openSession } from '@mcp-kit/testbed/fetch-client';

let cluster: TestCluster;
let a: Instance;
let b: Instance;

beforeAll(async () => {
  cluster = await startCluster(2, { HEARTBEAT_MS: '500', RETRY_MS: '200', DRAIN_MS: '20000', CLUSTER: 'forward' });
  [a, b] = cluster.instances as [Instance, Instance];
}, 60_000);

afterAll(async () => {
  await cluster?.close();
});

it('requests for a session whose call runs on the draining owner are answered throughout, before and after the call ends', async () => {
  const { headers } = await openSession(http(b.url));
  const running = await http(b.url).postSse(callTool(2, 'long_task', { steps: 8, intervalMs: 100 }), headers);
  await running.next();
  const exited = b.stop('SIGTERM');
  await b.waitFor(/draining/);
  const statuses: Array<{ status: number; servedBy: string | null; body: string }> = [];
  let id = 10;
  let bExited = false;
  void exited.then(() => (bExited = true));
  // Four clients' worth at once until B is gone: the call ends meanwhile (0.8 s) and the drain
  // hands the session off while requests are on their way between the two instances.
  const loop = async () => {
    while (!bExited) {
      const res = await fetch(b.url, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: id++, method: 'tools/list' }),
      }).catch(() => undefined);
      if (!res) return; // B closed its listener
      statuses.push({ status: res.status, servedBy: res.headers.get('x-served-by'), body: (await res.text()).slice(0, 300) });
    }
  };
  await Promise.all([loop(), loop(), loop(), loop()]);
  await exited;
  const bad = statuses.filter((s) => s.status !== 200);
  const counts = new Map<string, number>();
  for (const s of statuses) counts.set(`${s.status} ${s.servedBy}`, (counts.get(`${s.status} ${s.servedBy}`) ?? 0) + 1);
  console.log(`[hand-over] ${statuses.length} requests during the drain: ${[...counts].map(([k, n]) => `${k} × ${n}`).join(', ')}`);
  expect(bad, JSON.stringify(bad.slice(0, 3))).toEqual([]);
  expect(statuses.length).toBeGreaterThan(5);
  // After B is gone, the session is served by A.
  const after = await http(a.url).post({ jsonrpc: '2.0', id: 999, method: 'tools/list' }, headers);
  expect(after.status).toBe(200);
}, 60_000);
