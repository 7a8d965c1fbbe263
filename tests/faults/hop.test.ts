/**
 * The internal hop between instances is authenticated (invariant: configuration-trusted): a client that sends
 * `mcp-kit-forwarded-by` itself is served as the client it is, and instances' own forwards, signed
 * with the secret they share through Redis, still work.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FORWARDED_HEADER } from '@mcp-kit/core';
import { startCluster, type Instance, type TestCluster } from '@mcp-kit/testbed/cluster';
import { callTool, initializeRequest } from '@mcp-kit/testbed/requests';
import { http, openSession } from '@mcp-kit/testbed/fetch-client';

let cluster: TestCluster;
let a: Instance;
let b: Instance;

beforeAll(async () => {
  cluster = await startCluster(2, { HEARTBEAT_MS: '500', RETRY_MS: '200' });
  [a, b] = cluster.instances as [Instance, Instance];
}, 60_000);

afterAll(async () => {
  await cluster?.close();
});

describe('the hop between instances', () => {
  it("a client's own mcp-kit-forwarded-by is not trusted: its call on another instance is forwarded to the session's owner", async () => {
    const { headers } = await openSession(http(a.url));
    const forged = await http(b.url).postSse(callTool(2, 'test_simple_text'), { ...headers, [FORWARDED_HEADER]: 'node-0' });
    const answer = await forged.until((m) => m.id === 2);
    expect(JSON.parse(answer.at(-1)!.data!).result.content[0].type).toBe('text');
    // B never took the session over from its live owner: no restore line in its output.
    expect(b.output).not.toMatch(/restored session/);
  });

  it('calls that instances forward to each other are served (signed with the shared secret)', async () => {
    const { headers } = await openSession(http(a.url));
    const call = await http(b.url).postSse(callTool(3, 'test_simple_text'), headers);
    const answer = await call.until((m) => m.id === 3);
    expect(JSON.parse(answer.at(-1)!.data!).result.content[0].type).toBe('text');
    expect(b.output).not.toMatch(/restored session/);
  });

  it('a client cannot open a session on a draining instance by dressing its initialize up as a forward: it is handed over', async () => {
    // A call that runs on B for a few seconds keeps B draining.
    const { headers } = await openSession(http(b.url));
    const running = await http(b.url).postSse(callTool(4, 'long_task', { steps: 30, intervalMs: 100 }), headers);
    await running.next();
    const exited = b.stop('SIGTERM');
    await b.waitFor(/draining/);
    const forged = await fetch(b.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', [FORWARDED_HEADER]: 'node-0' },
      body: JSON.stringify(initializeRequest()),
    });
    await forged.body?.cancel();
    // Handed over to A, which owns the new session; before, B opened it while going away.
    expect(forged.status).toBe(200);
    expect(forged.headers.get('x-served-by')).toBe(a.name);
    running.abort();
    await exited;
  }, 30_000);
});
