/**
 * A session's owner frozen (SIGSTOP: a paused VM, a serverless freeze, a stop-the-world stall)
 * while a peer forwards to it (invariants: at-most-once, come-back-later). The peer's forward must
 * not wait for as long as the owner is frozen: a connect timer guards only a new connection (a
 * reused keep-alive socket, or the kernel's accept queue of a frozen process, connects at once), so
 * the wait for the answer's head is bounded too, and a relayed SSE stream must not go silent with
 * its client for as long.
 *
 * Two express-example instances in forwarding mode, no proxy in the way of the raw requests:
 * node-1 owns the sessions, node-0 forwards to it on keep-alive sockets it used just before.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLUSTER_MODE, startCluster, type Instance, type TestCluster } from '@mcp-kit/testbed/cluster';
import { callTool } from '@mcp-kit/testbed/requests';
import { errorOf, http, openSession } from '@mcp-kit/testbed/fetch-client';
import { connectClient, type ClusterClient } from '@mcp-kit/testbed/clients';
import { oneTo } from '@mcp-kit/testbed/long-task';

// The owner's keep-alive comments on idle streams, and so the relay watchdog (2 × this), short for
// the test; the forward's response timeout stays at its default.
const KEEP_ALIVE_MS = 1_000;
const RESPONSE_TIMEOUT_MS = 3_000; // `responseTimeoutMs`'s default
// The owner counts as gone 9 s after its last beat: a freeze of a few seconds is not a loss.
const HEARTBEAT_MS = 3_000;
const ENV = { KEEP_ALIVE_MS: String(KEEP_ALIVE_MS), RETRY_MS: '300', HEARTBEAT_MS: String(HEARTBEAT_MS) };
// `pnpm test:chaos` (LONG=1) keeps the owner frozen for a minute, forwarding to it all along.
const FREEZE_MS = process.env.LONG === '1' ? 60_000 : 0;

let cluster: TestCluster | undefined;
let forwarder: Instance;
let owner: Instance;
const frozen = new Set<number>();
const clients: ClusterClient[] = [];

function freeze(i: Instance): void {
  process.kill(i.pid, 'SIGSTOP');
  frozen.add(i.pid);
}

function thaw(i: Instance): void {
  if (!frozen.delete(i.pid)) return;
  process.kill(i.pid, 'SIGCONT');
}

beforeAll(async () => {
  if (CLUSTER_MODE === 'shared') return;
  cluster = await startCluster(2, ENV);
  [forwarder, owner] = cluster.instances as [Instance, Instance];
}, 60_000);

afterAll(async () => {
  for (const pid of frozen) process.kill(pid, 'SIGCONT');
  frozen.clear();
  await Promise.all(clients.map((c) => c.close()));
  await cluster?.close();
});

/** `promise`, or a rejection naming `what` after `ms` (the test fails instead of hanging). */
function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** A call forwarded to the owner (through `forwarder`), read to its answer: the keep-alive socket is warm after it. */
async function forwardedCall(headers: Record<string, string>, id: number): Promise<void> {
  const call = await http(forwarder.url).postSse(callTool(id, 'test_simple_text'), headers);
  await call.until((m) => m.id === id);
  await call.ended_();
}

// Forwarding only (a shared cluster has no owner to forward to): defined only there, nothing skipped.
if (CLUSTER_MODE !== 'shared')
  describe('a peer forwarding to a frozen owner', () => {
    it('a relayed stream whose owner is alive but quiet (a tool that waits longer than the watchdog) is not cut: its keep-alives pass', async () => {
      const { headers } = await openSession(http(owner.url));
      const call = await http(forwarder.url).postSse(callTool(2, 'long_task', { steps: 2, intervalMs: 3 * KEEP_ALIVE_MS }), headers);
      const blocks = await call.until((m) => m.id === 2, 20_000);
      const steps = blocks.flatMap((b) => (b.data ? [JSON.parse(b.data)] : [])).filter((m) => m.method === 'notifications/message');
      expect(steps.map((m) => m.params.data.step)).toEqual([1, 2]);
      expect(call.raw).toMatch(/: keep-alive/);
    }, 30_000);

    it('an SDK v1 client whose call is relayed from an owner frozen for a few seconds comes back (its stream ends with the retry hint) and completes after the thaw', async () => {
      const proxy = cluster!.proxy;
      proxy.steer('initialize', 1);
      const c = await connectClient(proxy.url, 'frozen-owner-sdk');
      clients.push(c);
      // From now on every request reaches node-0, which forwards the session's to node-1.
      proxy.setDown(1, true);
      const from = proxy.log.length;
      const steps = 30;
      const running = c.callLongTask({ steps, intervalMs: 100 }, { timeoutMs: 40_000 });
      while (c.steps.length < 3) await new Promise((r) => setTimeout(r, 20));
      freeze(owner);
      const frozenAt = Date.now();
      await new Promise((r) => setTimeout(r, 3 * KEEP_ALIVE_MS + 2_000));
      const thawedAt = Date.now();
      thaw(owner);
      const result = await running;
      proxy.setDown(1, false);
      expect(result.content).toEqual([{ type: 'text', text: `completed ${steps} steps` }]);
      expect(c.steps).toEqual(oneTo(steps));
      // While the owner was frozen the client resumed (its relayed stream had ended as a server
      // close), and that resume was answered: before, it sat on the silent relayed stream.
      const resumes = proxy.log.slice(from).filter((r) => r.method === 'GET' && r.lastEventId !== undefined);
      expect(
        resumes.some((r) => r.status === 200 && r.at >= frozenAt && r.at <= thawedAt),
        JSON.stringify(resumes),
      ).toBe(true);
      expect(c.errors.map(String).filter((e) => /Maximum reconnection attempts|Failed to reconnect/.test(e))).toEqual([]);
    }, 60_000);

    it(
      'past its response timeout the peer answers: a POST with 502 (never run again here), a GET from a restored session; a relayed stream ends with the retry hint',
      async () => {
        const api = http(owner.url);
        const a = await openSession(api); // POSTed to while frozen
        const b = await openSession(api); // its standalone GET while frozen
        const c = await openSession(api); // a call relayed when the freeze comes
        const relayed = await http(forwarder.url).postSse(callTool(3, 'long_task', { steps: 200, intervalMs: 100 }), c.headers);
        await relayed.until((m) => m.method === 'notifications/message' && m.params.data.step === 3);
        // The socket node-0 forwards the next request on was used a moment ago.
        await forwardedCall(a.headers, 4);
        freeze(owner);
        const frozenAt = Date.now();
        const elapsed = () => Date.now() - frozenAt;

        const post = (async () => {
          const response = await fetch(forwarder.url, {
            method: 'POST',
            headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...a.headers },
            body: JSON.stringify(callTool(5, 'test_simple_text')),
            signal: AbortSignal.timeout(25_000),
          });
          return { response, at: elapsed() };
        })();
        const get = (async () => {
          const response = await fetch(forwarder.url, {
            headers: { accept: 'text/event-stream', ...b.headers },
            signal: AbortSignal.timeout(25_000),
          });
          return { response, at: elapsed() };
        })();
        const relayEnd = relayed.done.then(() => elapsed());
        // A failing run leaves them behind: they end with the cluster.
        post.catch(() => {});
        get.catch(() => {});

        try {
          // The relayed stream went silent: it ends once the watchdog saw 2 × keepAliveMs pass without
          // a byte (to 2.5 ×), with the retry hint, as a server close the client resumes from.
          const endedAt = await within(3 * KEEP_ALIVE_MS + 1_500, 'the relayed stream from the frozen owner to end', relayEnd);
          expect(endedAt).toBeLessThan(3 * KEEP_ALIVE_MS + 1_500);
          expect(relayed.blocks.at(-1)?.retry, relayed.raw.slice(-300)).toBeGreaterThan(0);
          // Its client comes back at once and is answered (from the shared store, on node-0).
          const lastId = [...relayed.blocks].reverse().find((x) => x.id)!.id!;
          const resumed = await within(5_000, 'the resume', http(forwarder.url).getSse({ ...c.headers, 'last-event-id': lastId }));
          expect(resumed.response.status).toBe(200);
          resumed.abort();

          // The POST: 502 with a JSON-RPC error once the owner has not answered (nor a probe on a new
          // connection) within the response timeout twice over; not restored and run here.
          const { response, at } = await within(2 * RESPONSE_TIMEOUT_MS + 5_000, 'the forwarded POST', post);
          expect(response.status).toBe(502);
          expect(at).toBeLessThan(2 * RESPONSE_TIMEOUT_MS + 2_000);
          const error = await errorOf(response);
          expect(error.code).toBe(-32000);
          expect(error.message).toMatch(/may have received/);
          expect(forwarder.output).not.toContain(`restored session ${a.sessionId}`);

          // The GET: the owner counts as gone once its heartbeat window passed; the session is
          // restored on node-0, which serves the stream itself (not relayed: its own x-served-by).
          const got = await within(2 * RESPONSE_TIMEOUT_MS + 3 * HEARTBEAT_MS + 5_000, 'the forwarded GET', get);
          expect(got.response.status).toBe(200);
          expect(got.response.headers.get('content-type')).toMatch(/^text\/event-stream/);
          expect(got.response.headers.get('x-served-by')).toBe(forwarder.name);
          await got.response.body?.cancel();
          console.log(`[frozen-owner] relayed stream ended after ${endedAt} ms; POST 502 after ${at} ms; GET served after ${got.at} ms`);
          // LONG: the owner stays frozen for a minute. Every POST the peer gets for its session meanwhile
          // is answered within the forward's bound (502 while the owner may hold it), and once the owner
          // counts as gone the peer restores the session and serves it itself (200).
          const during: Array<{ at: number; status: number; ms: number }> = [];
          for (let id = 100; elapsed() < FREEZE_MS; id++) {
            const sentAt = Date.now();
            const response = await fetch(forwarder.url, {
              method: 'POST',
              headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...a.headers },
              body: JSON.stringify(callTool(id, 'test_simple_text')),
              signal: AbortSignal.timeout(2 * RESPONSE_TIMEOUT_MS + 5_000),
            });
            await response.text();
            during.push({ at: elapsed(), status: response.status, ms: Date.now() - sentAt });
            await new Promise((r) => setTimeout(r, 2_000));
          }
          if (FREEZE_MS > 0) {
            console.log(
              `[frozen-owner] frozen ${elapsed()} ms; POSTs meanwhile: ${during.map((d) => `${d.status} after ${d.ms} ms`).join(', ')}`,
            );
            expect(during.filter((d) => d.status !== 200 && d.status !== 502)).toEqual([]);
            expect(during.filter((d) => d.ms >= 2 * RESPONSE_TIMEOUT_MS + 2_000)).toEqual([]);
            expect(during.at(-1)?.status).toBe(200);
          }
        } finally {
          thaw(owner);
          relayed.abort();
        }
        // Back from the freeze, the owner serves its session again: a forwarded call is answered.
        const deadline = Date.now() + 15_000;
        for (let id = 10; ; id++) {
          const again = await http(forwarder.url).post(callTool(id, 'test_simple_text'), a.headers);
          const text = await again.text();
          if (again.status === 200) {
            expect(text).toContain(`"id":${id}`);
            break;
          }
          if (Date.now() > deadline) throw new Error(`after the thaw: ${again.status} ${text}`);
          await new Promise((r) => setTimeout(r, 250));
        }
      },
      90_000 + FREEZE_MS,
    );
  });
