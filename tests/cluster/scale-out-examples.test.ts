/**
 * Scale-out end to end: two instances of an example app (built) with REDIS_URL behind a plain
 * round-robin proxy, a real redis-server, and the SDK's Client + StreamableHTTPClientTransport
 * talking to the proxy only. No sticky sessions: requests land on either instance in turn.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { answerServerRequests } from '@mcp-kit/testbed/clients';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';
import {
  instance,
  roundRobinProxy,
  type ExampleAppName,
  type Instance,
  type ProxiedRequest,
  type RoundRobinProxy,
} from '@mcp-kit/testbed/cluster';
import { freePort } from '@mcp-kit/testbed/processes';

let redis: TestRedis;
let instances: Instance[] = [];
let proxy: RoundRobinProxy;
let clients: Client[] = [];

/**
 * Every example app takes REDIS_URL: each runs the scenarios that show its wiring (stores, cluster,
 * INTERNAL_URL, x-served-by); express-example also runs those that test @mcp-kit/redis itself
 * (answers through either instance, a restart, Redis down), which do not depend on the framework.
 */
const APPS: Array<{ app: ExampleAppName; redisScenarios: boolean }> = [
  { app: 'express-example', redisScenarios: true },
  { app: 'koa-example', redisScenarios: false },
  { app: 'next-example', redisScenarios: false },
];

/** Instance output, for failure messages. */
const outputs = () => instances.map((i) => `--- ${i.name} (pid ${i.pid}) ---\n${i.output.slice(-4_000)}`).join('\n');

async function connect() {
  const client = new Client({ name: 'cluster-e2e', version: '1.0.0' }, { capabilities: { sampling: {}, elicitation: {} } });
  const transport = new StreamableHTTPClientTransport(new URL(proxy.url));
  const errors: Error[] = [];
  client.onerror = (e) => errors.push(e);
  const start = proxy.log.length;
  await client.connect(transport);
  clients.push(client);
  const steps: number[] = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    const data = n.params.data as { step?: number };
    if (typeof data?.step === 'number') steps.push(data.step);
  });
  const init = proxy.log.slice(start).find((r) => r.kind === 'initialize');
  if (!init?.servedBy) throw new Error(`initialize not seen by the proxy:\n${JSON.stringify(proxy.log.slice(start))}`);
  const owner = init.servedBy;
  const sessionId = transport.sessionId as string;
  const mine = () => proxy.log.filter((r) => r.sessionId === sessionId);
  return { client, transport, steps, owner, sessionId, mine, errors };
}

const resumesOf = (log: ProxiedRequest[]) => log.filter((r) => r.method === 'GET' && r.lastEventId);

async function until(check: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}\n${outputs()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe.each(APPS)('Redis scale-out: two $app instances behind a round-robin proxy', ({ app, redisScenarios }) => {
  beforeAll(async () => {
    redis = await startRedis();
    const ports = [await freePort(), await freePort()];
    instances = ports.map((port, i) => instance(`node-${i}`, port, { REDIS_URL: redis.url, RETRY_MS: '100' }, app));
    await Promise.all(instances.map((i) => i.start()));
    proxy = await roundRobinProxy(ports);
  }, 60_000);

  afterEach(async () => {
    for (const c of clients) await c.close().catch(() => {});
    clients = [];
  });

  afterAll(async () => {
    await proxy?.close();
    for (const i of instances) await i.stop('SIGKILL');
    await redis?.stop();
  });

  it('long_task with closeEvery delivers every log once, in order, and the result, while resumes land on the other instance and are served there', async () => {
    const { client, steps, owner, mine } = await connect();
    // Two requests in a row: one of them lands on the instance that does not own the session.
    await client.ping();
    await client.ping();
    const progress: number[] = [];
    const result = await client.callTool(
      { name: 'long_task', arguments: { steps: 30, intervalMs: 30, closeEvery: 3, retryMs: 50 } },
      CallToolResultSchema,
      {
        onprogress: (p) => progress.push(p.progress),
        timeout: 30_000,
      },
    );
    expect(result.content).toEqual([{ type: 'text', text: 'completed 30 steps' }]);
    expect(steps).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
    expect(progress).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
    const resumes = resumesOf(mine());
    // Nine closes, but a close while the client is still away from the previous one needs no
    // resume of its own (one resume catches both up): how many there are depends on the machine's
    // speed (8 in one loaded run of next start), so only "several" is asserted.
    expect(resumes.length).toBeGreaterThanOrEqual(3);
    expect(resumes.every((r) => r.status === 200)).toBe(true);
    // Resumes that the proxy sent to the other instance were answered by it, from Redis (not forwarded).
    const elsewhere = resumes.filter((r) => r.servedBy !== owner);
    expect(elsewhere.length, JSON.stringify(resumes)).toBeGreaterThanOrEqual(2);
    // Plain requests that landed on the other instance were forwarded to the owner and served there.
    const posts = mine().filter((r) => r.method === 'POST');
    expect(new Set(posts.map((r) => r.backend)).size, JSON.stringify(posts)).toBe(2);
    expect(
      posts.every((r) => r.servedBy === owner && r.status < 300),
      JSON.stringify(posts),
    ).toBe(true);
  }, 60_000);

  // The three scenarios below test @mcp-kit/redis itself (answers through either instance, a
  // restart, Redis down), not the app: they are defined for express-example only.
  if (redisScenarios) {
    it('test_elicitation and test_sampling work through the proxy, whichever instance gets the answers', async () => {
      const { client, mine, owner } = await connect();
      answerServerRequests(client);
      for (let i = 0; i < 4; i++) {
        // Five requests per round (ping, two calls, two answers), so the answers alternate between instances.
        await client.ping();
        const sampled = await client.callTool({ name: 'test_sampling', arguments: { prompt: `hello ${i}` } });
        expect(JSON.stringify(sampled.content)).toContain(`echo: hello ${i}`);
        const elicited = await client.callTool({ name: 'test_elicitation', arguments: { message: 'who are you?' } });
        expect(JSON.stringify(elicited.content)).toContain('ada@example.com');
      }
      const answers = mine().filter((r) => r.kind === 'response');
      expect(answers.length).toBe(8);
      // Answers reached the owner whichever backend the proxy chose.
      expect(new Set(answers.map((r) => r.backend)).size).toBe(2);
      expect(answers.every((r) => r.servedBy === owner && r.status === 202)).toBe(true);
    }, 60_000);

    it('restarting the non-owner instance mid-task loses nothing', async () => {
      const { client, steps, owner, mine } = await connect();
      const other = instances.find((i) => i.name !== owner)!;
      const call = client.callTool(
        { name: 'long_task', arguments: { steps: 120, intervalMs: 40, closeEvery: 4, retryMs: 50 } },
        CallToolResultSchema,
        { timeout: 45_000 },
      );
      await until(() => steps.length >= 12 && resumesOf(mine()).some((r) => r.servedBy === other.name), 'a resume on the non-owner');
      const before = mine().length;
      await other.stop('SIGKILL');
      await other.start();
      // The restarted instance serves resumes again while the call runs (120 steps: ~5 s, a restart ~1 s).
      await until(() => resumesOf(mine().slice(before)).some((r) => r.servedBy === other.name), 'a resume on the restarted instance');
      const result = await call;
      expect(result.content).toEqual([{ type: 'text', text: 'completed 120 steps' }]);
      expect(steps).toEqual(Array.from({ length: 120 }, (_, i) => i + 1));
    }, 60_000);

    it('Redis down: clear 503s with JSON-RPC bodies, processes stay up, and service recovers by itself when Redis returns', async () => {
      const old = await connect();
      await redis.stop();
      try {
        const init = {
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
        };
        const call = { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'long_task', arguments: { steps: 1, intervalMs: 0 } } };
        const headers = {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2025-11-25',
        };
        // Twice each, so both instances answer: a new session, and a call on the existing one (owner and not).
        for (let i = 0; i < 2; i++) {
          for (const [body, extra] of [
            [init, {}],
            [call, { 'mcp-session-id': old.sessionId }],
          ] as const) {
            const res = await fetch(proxy.url, { method: 'POST', headers: { ...headers, ...extra }, body: JSON.stringify(body) });
            expect(res.status, outputs()).toBe(503);
            expect(res.headers.get('retry-after')).toBe('1');
            const json = (await res.json()) as { jsonrpc: string; error: { code: number; message: string } };
            expect(json.jsonrpc).toBe('2.0');
            expect(json.error.code).toBe(-32000);
            expect(json.error.message).toMatch(/^Service Unavailable: the (event store|session directory) is unavailable; retry later$/);
          }
        }
        for (const i of instances) {
          expect(i.alive).toBe(true);
          process.kill(i.pid, 0);
        }
      } finally {
        await redis.start();
      }
      // Everything works again without a restart: new sessions, and the old one (its owner record is
      // rewritten by the owner's heartbeat after Redis came back empty).
      let fresh: Awaited<ReturnType<typeof connect>> | undefined;
      const deadline = Date.now() + 20_000;
      while (!fresh) {
        try {
          fresh = await connect();
        } catch (error) {
          if (Date.now() > deadline) throw new Error(`no recovery: ${String(error)}\n${outputs()}`);
          await new Promise((r) => setTimeout(r, 100));
        }
      }
      const result = await fresh.client.callTool(
        { name: 'long_task', arguments: { steps: 8, intervalMs: 20, closeEvery: 2, retryMs: 50 } },
        CallToolResultSchema,
        { timeout: 20_000 },
      );
      expect(result.content).toEqual([{ type: 'text', text: 'completed 8 steps' }]);
      expect(fresh.steps).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
      // The old session too, on both instances, once its owner's heartbeat has rewritten its record.
      const list = () =>
        fetch(proxy.url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            'mcp-protocol-version': '2025-11-25',
            'mcp-session-id': old.sessionId,
          },
          body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'ping' }),
        }).then(async (r) => (await r.text(), r.status));
      const reclaimBy = Date.now() + 10_000;
      while ((await list()) !== 200 || (await list()) !== 200) {
        if (Date.now() > reclaimBy)
          throw new Error(
            `old session not served again: ${await list()} ${await list()} ${JSON.stringify(proxy.log.slice(-6))}\n${outputs()}`,
          );
        await new Promise((r) => setTimeout(r, 100));
      }
      for (let i = 0; i < 2; i++) {
        const again = await old.client.callTool({ name: 'long_task', arguments: { steps: 2, intervalMs: 0 } }, CallToolResultSchema, {
          timeout: 20_000,
        });
        expect(again.content).toEqual([{ type: 'text', text: 'completed 2 steps' }]);
      }
    }, 90_000);
  }

  it('SIGTERM on the owner mid-call: it drains and exits 0 while the client follows the call from the other instance, every step once, in order', async () => {
    const { client, steps, owner, mine } = await connect();
    const ownerInstance = instances.find((i) => i.name === owner)!;
    const call = client.callTool({ name: 'long_task', arguments: { steps: 20, intervalMs: 50 } }, CallToolResultSchema, {
      timeout: 30_000,
    });
    await until(() => steps.length >= 3, 'the call to be under way');
    const before = mine().length;
    await ownerInstance.stop('SIGTERM');
    const result = await call;
    expect(result.content).toEqual([{ type: 'text', text: 'completed 20 steps' }]);
    expect(steps).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(ownerInstance.exitCode, ownerInstance.runOutput).toBe(0);
    expect(ownerInstance.runOutput).toMatch(new RegExp(`${app}: SIGTERM: draining \\(deadline \\d+ ms\\)\\n${app}: drained in \\d+ ms\\n`));
    // Sent away when the drain began, the client resumed and was served by the other instance.
    const resumes = resumesOf(mine().slice(before));
    expect(resumes.length, JSON.stringify(resumes)).toBeGreaterThanOrEqual(1);
    expect(resumes.every((r) => r.status === 200 && r.servedBy !== owner)).toBe(true);
    await ownerInstance.start();
  }, 60_000);

  it('a session whose owner crashed is restored on the other instance: its next request is answered there, a session that never existed gets 404', async () => {
    const { sessionId, owner } = await connect();
    const ownerInstance = instances.find((i) => i.name === owner)!;
    await ownerInstance.stop('SIGKILL');
    const headers = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-11-25',
      'mcp-session-id': sessionId,
    };
    const body = JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list', params: {} });
    // The owner's heartbeat key lives 3 beats (6 s) after its crash: the request waits that out
    // (never a 502), then the other instance restores the session from its record and answers.
    const started = Date.now();
    const res = await fetch(proxy.url, { method: 'POST', headers, body });
    expect(res.status, outputs()).toBe(200);
    expect(res.headers.get('x-served-by')).not.toBe(owner);
    expect(res.headers.get('mcp-session-id')).toBe(sessionId);
    expect(await res.text()).toContain('"id":9');
    expect(Date.now() - started).toBeLessThan(15_000);
    // The instance that took it over knows the client as before, and says so.
    const heir = instances.find((i) => i.name === res.headers.get('x-served-by'))!;
    await heir.waitFor(
      new RegExp(`restored session ${sessionId} for cluster-e2e/1\\.0\\.0 \\(capabilities: (sampling,elicitation|elicitation,sampling)\\)`),
    );
    const unknown = await fetch(proxy.url, { method: 'POST', headers: { ...headers, 'mcp-session-id': 'nobody-ever-had-this-id' }, body });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toEqual({
      jsonrpc: '2.0',
      error: {
        code: -32001,
        message: 'Session not found: it expired, was deleted, or the server instance that held it is gone; initialize a new session',
      },
    });
    await ownerInstance.start();
  }, 60_000);
});
