/**
 * An owner paused past its heartbeat window (SIGSTOP: a GC pause, CPU throttling, a partition),
 * then resumed (invariant: one-owner). Meanwhile a peer took its session over for the client's next
 * request. Once it runs again the paused instance must not take the session back: the owner record
 * keeps naming the peer, the paused instance drops its stale copy and forwards to the peer, and
 * nothing of the peer's session (its record, its events) is deleted by the stale one.
 */
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisClient } from '@mcp-kit/redis';
import { startCluster, type Instance, type TestCluster } from '@mcp-kit/testbed/cluster';
import { callTool, LEGACY } from '@mcp-kit/testbed/requests';
import { http, openSession } from '@mcp-kit/testbed/fetch-client';

const HEARTBEAT_MS = 300;

let cluster: TestCluster;
let x: Instance;
let y: Instance;
let admin: ReturnType<typeof createRedisClient>;

beforeAll(async () => {
  cluster = await startCluster(2, { HEARTBEAT_MS: String(HEARTBEAT_MS), RETRY_MS: '100' });
  [x, y] = cluster.instances as [Instance, Instance];
  admin = createRedisClient(cluster.redis.url);
  await new Promise<void>((resolve) => (admin.status === 'ready' ? resolve() : admin.once('ready', () => resolve())));
}, 60_000);

afterAll(async () => {
  admin?.disconnect();
  if (x) process.kill(x.pid, 'SIGCONT');
  await cluster?.close();
});

const instanceIdOf = (inst: Instance) => inst.output.match(/instance ([0-9a-f-]{36})/)![1]!;

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function answer(url: string, id: number, headers: Record<string, string>): Promise<{ text: string; servedBy: string | null }> {
  const res = await http(url).postSse(callTool(id, 'test_simple_text'), headers);
  const blocks = await res.until((m) => m.id === id);
  return { text: JSON.parse(blocks.at(-1)!.data!).result.content[0].text, servedBy: res.response.headers.get('x-served-by') };
}

/** The owner's record of a session: which instance it names. */
const ownerOf = async (sessionId: string) => (await admin.hget(`mcp-kit:{${sessionId}}:s`, 'o')) ?? undefined;

/**
 * A session opened and served on X; X then `SIGSTOP`ped until its instance key expires, and the
 * client's next request sent to Y, which restores the session from its record (X stays stopped).
 */
async function takenOverWhileXIsPaused() {
  const { headers } = await openSession(http(x.url));
  const sessionId = headers['mcp-session-id']!;
  expect((await answer(x.url, 2, headers)).servedBy).toBe(x.name);
  const xId = instanceIdOf(x);
  process.kill(x.pid, 'SIGSTOP');
  // X misses its beats: its instance key expires (3 beats).
  await until('X counted as gone', async () => (await admin.exists(`mcp-kit:instance:${xId}`)) === 0);
  expect((await answer(y.url, 3, headers)).servedBy).toBe(y.name);
  return { headers, sessionId, xId, yId: instanceIdOf(y) };
}

describe('an owner paused past its heartbeat window, then resumed', () => {
  it('does not take its session back from the peer that took it over, drops its stale copy, and deletes nothing of the peer', async () => {
    const { headers, sessionId, xId, yId } = await takenOverWhileXIsPaused();
    await y.waitFor(new RegExp(`restored session ${sessionId}`));
    const owner = () => ownerOf(sessionId);
    expect(await owner()).toBe(yId);

    process.kill(x.pid, 'SIGCONT');
    // X beats again (its instance key is back), then once more: by then it has looked at its sessions.
    await until('X beats again', async () => (await admin.exists(`mcp-kit:instance:${xId}`)) === 1);
    await new Promise((resolve) => setTimeout(resolve, 2 * HEARTBEAT_MS));
    expect(await owner()).toBe(yId);

    // A request that reaches X for the session is served by Y, the one owner, and so is every later one.
    for (let id = 4; id < 8; id++) {
      const served = await answer(id % 2 === 0 ? x.url : y.url, id, headers);
      expect(served.text.length).toBeGreaterThan(0);
      expect(served.servedBy, `request ${id}`).toBe(y.name);
    }
    // X let its copy go without deleting anything of Y's: the owner and restore records stand.
    expect(await owner()).toBe(yId);
    expect(await admin.hexists(`mcp-kit:{${sessionId}}:s`, 'r')).toBe(1);
    expect((await answer(x.url, 9, headers)).servedBy).toBe(y.name);
  }, 60_000);
});

/**
 * A request sent to an instance while it is stopped: the kernel accepts it, the process reads it the
 * moment it runs again, before any heartbeat of its own could answer. `sent` resolves once the
 * request is in the socket; `answered` with its status, who served it and its body.
 */
function sendToStopped(url: string, body: unknown, headers: Record<string, string>) {
  const req = httpRequest(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': LEGACY,
      ...headers,
    },
  });
  const sent = new Promise<void>((resolve, reject) => req.on('finish', resolve).on('error', reject));
  const answered = new Promise<{ status: number; servedBy: string | undefined; body: string }>((resolve, reject) => {
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, servedBy: res.headers['x-served-by'] as string | undefined, body: text }));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
  req.end(JSON.stringify(body));
  return { sent, answered };
}

describe('a request that reached the paused owner before it runs again', () => {
  it('is served by the peer that took the session over, not by the stale copy, and the peer keeps everything', async () => {
    const { headers, sessionId, xId, yId } = await takenOverWhileXIsPaused();
    const owner = () => ownerOf(sessionId);
    expect(await owner()).toBe(yId);
    const streamsBefore = await admin.keys(`mcp-kit:*${sessionId}*`);

    // X reads this request first thing when it runs again: it must not serve it from its stale copy.
    const queued = sendToStopped(x.url, callTool(4, 'test_simple_text'), headers);
    await queued.sent;
    process.kill(x.pid, 'SIGCONT');
    const reply = await Promise.race([
      queued.answered,
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no answer from X within 15 s')), 15_000)),
    ]);
    expect(reply.status, reply.body).toBe(200);
    expect(reply.servedBy, reply.body).toBe(y.name);
    expect(reply.body).toContain('"id":4');
    expect(reply.body).toContain('"result"');

    // One owner, the peer; nothing of its session deleted by the stale instance.
    await until('X beats again', async () => (await admin.exists(`mcp-kit:instance:${xId}`)) === 1);
    expect(await owner()).toBe(yId);
    for (const key of streamsBefore) expect(await admin.exists(key), key).toBe(1);
    expect((await answer(x.url, 5, headers)).servedBy).toBe(y.name);
  }, 60_000);
});

describe('a session its new owner ended while the old one was paused', () => {
  it('is not brought back by the old owner when it runs again: 404, and no owner record', async () => {
    const { headers, sessionId, xId } = await takenOverWhileXIsPaused();
    // The client ends its session on Y, the owner now.
    expect((await http(y.url).del(headers)).status).toBe(200);
    await until('Y released the session', async () => (await admin.hexists(`mcp-kit:{${sessionId}}:s`, 'o')) === 0);

    process.kill(x.pid, 'SIGCONT');
    await until('X beats again', async () => (await admin.exists(`mcp-kit:instance:${xId}`)) === 1);
    const res = await http(x.url).post(callTool(4, 'test_simple_text'), headers);
    await res.body?.cancel();
    expect(res.status).toBe(404);
    expect(await admin.hexists(`mcp-kit:{${sessionId}}:s`, 'o')).toBe(0);
  }, 60_000);
});

describe('Redis restarted empty while two instances held the session (its old owner paused, the peer that took it over)', () => {
  it('the peer that took the session over keeps it, though the old owner writes its records back first', async () => {
    const { headers, sessionId, xId, yId } = await takenOverWhileXIsPaused();
    await y.waitFor(new RegExp(`restored session ${sessionId}`));
    // Y stops too, Redis comes back empty, and X runs again first: it finds its owner record gone
    // with the rest of the data, and writes it back.
    process.kill(y.pid, 'SIGSTOP');
    try {
      await cluster.redis.stop();
      await cluster.redis.start();
      const owner = () => ownerOf(sessionId).catch(() => undefined); // admin reconnects meanwhile
      process.kill(x.pid, 'SIGCONT');
      await until('X wrote its record back', async () => (await owner()) === xId);
    } finally {
      process.kill(y.pid, 'SIGCONT');
    }
    // Y took the session over after X had it: Y's record wins, whichever instance beat first.
    await until('Y has its session again', async () => (await ownerOf(sessionId).catch(() => undefined)) === yId);
    // X hears of it at its next beat and drops its stale copy: Y serves every request, one owner.
    await new Promise((resolve) => setTimeout(resolve, 2 * HEARTBEAT_MS));
    for (let id = 4; id < 8; id++) {
      const served = await answer(id % 2 === 0 ? x.url : y.url, id, headers);
      expect(served.servedBy, `request ${id}`).toBe(y.name);
    }
    expect(await ownerOf(sessionId)).toBe(yId);
  }, 60_000);
});
