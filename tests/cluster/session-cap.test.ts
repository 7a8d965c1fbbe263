/**
 * A session belongs to the deployment, not to an instance (DESIGN, "Scale-out"): what an instance
 * lets go of at its `maxSessions` (or `maxSessionsPerPrincipal`), or when it hibernates an idle
 * session, is only its in-memory copy. Two built express-example instances on one redis-server,
 * each holding at most 40 sessions (or none that is idle, with `HIBERNATE_MS=0`): 120 sessions
 * opened on one of them and left idle, then a random 40 of them called again, on that instance and
 * through the other one. Every call is answered: none of the sessions let go of is gone.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisClient } from '@mcp-kit/redis';
import { startCluster, type Instance, type TestCluster } from '@mcp-kit/testbed/cluster';
import { callTool } from '@mcp-kit/testbed/requests';
import { http, openSession } from '@mcp-kit/testbed/fetch-client';

const CAP = 40;
const SESSIONS = 120;
const CALLED_AGAIN = 40;
const ANSWER = '200 This is a simple text response for testing.';

/** `count` distinct items of `list`, picked at random. */
function pick<T>(list: T[], count: number): T[] {
  const copy = [...list];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy.slice(0, count);
}

/** What `test_simple_text` answered on `on` for the session: `<status> <text of its result>`, and who served it. */
async function callAgain(on: Instance, headers: Record<string, string>, id: number): Promise<string> {
  const response = await http(on.url).post(callTool(id, 'test_simple_text'), headers);
  const body = await response.text();
  if (response.status !== 200) return `${response.status} ${body.slice(0, 200)}`;
  const answer = body
    .split('\n')
    .filter((line) => line.startsWith('data: {'))
    .map((line) => JSON.parse(line.slice(6)) as { id?: unknown; result?: { content?: { text?: string }[] } })
    .find((message) => message.id === id);
  return `200 ${answer?.result?.content?.[0]?.text ?? `no answer in ${body.slice(0, 200)}`}`;
}

/** What makes an instance let go of sessions: a cap, or hibernation at once (each session, as soon as it is idle). */
const CAPS = [
  { mode: 'forward', cap: 'MAX_SESSIONS', value: String(CAP) },
  { mode: 'shared', cap: 'MAX_SESSIONS', value: String(CAP) },
  { mode: 'forward', cap: 'MAX_SESSIONS_PER_PRINCIPAL', value: String(CAP) },
  { mode: 'shared', cap: 'MAX_SESSIONS_PER_PRINCIPAL', value: String(CAP) },
  { mode: 'forward', cap: 'HIBERNATE_MS', value: '0' },
  { mode: 'shared', cap: 'HIBERNATE_MS', value: '0' },
] as const;

describe.each(CAPS)('$cap=$value in a $mode cluster', ({ mode, cap, value }) => {
  let cluster: TestCluster;
  let a: Instance;
  let b: Instance;
  let sessions: Record<string, string>[];

  beforeAll(async () => {
    // Clients without auth count by address for the per-principal cap: all of them are one holder here.
    cluster = await startCluster(2, { CLUSTER: mode, [cap]: value, LIVE_PAGE: '0' });
    [a, b] = cluster.instances as [Instance, Instance];
    sessions = [];
    // A few at a time, as clients arrive; every one answered by instance A.
    for (let i = 0; i < SESSIONS; i += 10) {
      const opened = await Promise.all(Array.from({ length: 10 }, () => openSession(http(a.url))));
      sessions.push(...opened.map((s) => s.headers));
    }
  }, 120_000);

  afterAll(async () => {
    await cluster?.close();
  });

  it.each([
    { where: 'there', on: () => a, firstId: 100 },
    { where: 'through the other instance', on: () => b, firstId: 200 },
  ])(
    `${SESSIONS} idle sessions opened on one instance: ${CALLED_AGAIN} of them called again $where are all answered`,
    async ({ on, firstId }) => {
      const answers = await Promise.all(pick(sessions, CALLED_AGAIN).map((headers, i) => callAgain(on(), headers, firstId + i)));
      expect(
        answers.filter((answer) => answer !== ANSWER),
        cluster.outputs(),
      ).toEqual([]);
    },
    60_000,
  );

  // Forwarding only (shared mode has no owner records), defined only where it applies: nothing skipped.
  if (mode === 'forward' && cap !== 'MAX_SESSIONS_PER_PRINCIPAL')
    it('an owner record that still names the instance that let the session go: restored there, for a request sent to it or forwarded by a peer', async () => {
      const admin = createRedisClient(cluster.redis.url);
      try {
        await new Promise<void>((resolve) => (admin.status === 'ready' ? resolve() : admin.once('ready', () => resolve())));
        const instanceId = a.output.match(/instance ([0-9a-f-]{36})/)![1]!;
        // Sessions A let go of (the cap, or hibernation), whose owner record A's hand-off deleted.
        const ownerless: Record<string, string>[] = [];
        for (const headers of sessions)
          if ((await admin.hexists(`mcp-kit:{${headers['mcp-session-id']}}:s`, 'o')) === 0) ownerless.push(headers);
        expect(ownerless.length).toBeGreaterThanOrEqual(2);
        // As if Redis had not taken that hand-off: the record names A, which holds no copy.
        for (const headers of ownerless.slice(0, 2))
          await admin.hset(`mcp-kit:{${headers['mcp-session-id']}}:s`, { o: instanceId, u: a.url });
        const [direct, forwarded] = ownerless as [Record<string, string>, Record<string, string>];
        const here = await http(a.url).post(callTool(300, 'test_simple_text'), direct);
        expect([here.status, here.headers.get('x-served-by')]).toEqual([200, a.name]);
        expect(await here.text()).toContain('This is a simple text response for testing.');
        const viaPeer = await http(b.url).post(callTool(301, 'test_simple_text'), forwarded);
        expect([viaPeer.status, viaPeer.headers.get('x-served-by')]).toEqual([200, a.name]);
        expect(await viaPeer.text()).toContain('This is a simple text response for testing.');
      } finally {
        admin.disconnect();
      }
    }, 30_000);
});
