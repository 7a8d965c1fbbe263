/**
 * Load, against every adapter: many idle standalone streams with keep-alives flowing, many
 * concurrent polling tool calls that must all complete with every event, and the session cap
 * under a storm of initializes.
 *
 * CI runs small counts; `pnpm test:chaos` runs 10,000 idle streams and 1,000 concurrent calls.
 */
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { adapters, type ServerUnderTest } from '@mcp-kit/testbed/adapters';
import { LEGACY as PROTOCOL, initializeRequest as initialize, callTool as toolCall } from '@mcp-kit/testbed/requests';
import { jsonRpcError, RawSession, RawSse } from '@mcp-kit/testbed/raw-client';
import { collect, listenerPid, rssOf } from '@mcp-kit/testbed/memory';
import { count, LONG } from '@mcp-kit/testbed/random';

const IDLE_STREAMS = count(300, 10_000, 'IDLE_STREAMS');
const CONCURRENT_CALLS = count(100, 1_000, 'CONCURRENT_CALLS');
const MB = 1024 * 1024;
const mb = (bytes: number) => Math.round((bytes / MB) * 10) / 10;

/** The soft fd limit a child started through bash can have: as much as the hard limit allows. */
function fdLimits(): { soft: number; hard: number } {
  const out = spawnSync('bash', ['-c', 'echo $(ulimit -Sn) $(ulimit -Hn)'], { encoding: 'utf8' }).stdout.trim().split(' ');
  const parse = (v: string | undefined) => (v === 'unlimited' ? Infinity : Number(v));
  return { soft: parse(out[0]), hard: parse(out[1]) };
}

/** Reads JSON lines from a child until one matches; rejects if the child exits or reports an error. */
function lines(child: ReturnType<typeof spawn>) {
  const queue: any[] = [];
  let wake: (() => void) | undefined;
  let exited = false;
  let stderr = '';
  let buffer = '';
  let progress: unknown;
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    buffer += chunk;
    let at: number;
    while ((at = buffer.indexOf('\n')) !== -1) {
      const line = buffer.slice(0, at);
      buffer = buffer.slice(at + 1);
      if (!line.startsWith('{')) continue;
      const parsed = JSON.parse(line);
      if (parsed.progress !== undefined) progress = parsed;
      else queue.push(parsed);
    }
    wake?.();
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  child.once('exit', () => {
    exited = true;
    wake?.();
  });
  return async function next(timeoutMs: number): Promise<any> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const line = queue.shift();
      if (line) {
        if (line.error) throw new Error(`load client: ${line.error}`);
        return line;
      }
      if (exited) throw new Error(`load client exited: ${stderr.slice(-2000)}`);
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(
          `load client: nothing within ${timeoutMs} ms (last progress ${JSON.stringify(progress)}); stderr: ${stderr.slice(-2000)}`,
        );
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        wake = () => (clearTimeout(t), resolve());
      });
    }
  };
}

/** Drives one polling call to its result, honouring each close's retry hint; returns the steps seen. */
async function pollCall(
  session: RawSession,
  id: number,
  args: { steps: number; intervalMs: number; closeEvery: number; retryMs: number },
  first?: RawSse,
) {
  const streams: RawSse[] = [first ?? (await session.postSse(toolCall(id, 'long_task', args)))];
  for (;;) {
    const last = streams.at(-1)!;
    expect(await last.end(120_000)).toBe('server');
    if (last.messages.some((m) => m.message.id === id)) break;
    const retry = last.blocks.at(-1)?.retry;
    if (retry === undefined) throw new Error(`stream ended without a retry: status ${last.status} ${last.raw.slice(0, 300)}`);
    expect(retry).toBe(args.retryMs);
    await new Promise((resolve) => setTimeout(resolve, retry));
    streams.push(await session.get(last.lastEventId));
  }
  const messages = streams.flatMap((s) => s.messages.map((m) => m.message));
  return {
    connections: streams.length,
    steps: messages.filter((m) => m.method === 'notifications/message').map((m) => m.params.data.step),
    results: messages.filter((m) => m.id !== undefined),
  };
}

describe.each(adapters)('load: $name', (adapter) => {
  let sut: ServerUnderTest | undefined;
  afterEach(async () => {
    await sut?.close();
    sut = undefined;
  });

  it(
    `${IDLE_STREAMS} idle standalone GET streams in one process, keep-alives flowing on every one`,
    async () => {
      const { soft, hard } = fdLimits();
      // The server's process holds one socket per stream; the client gets its own process.
      const need = IDLE_STREAMS + 1_000;
      expect(soft, `this process may open ${soft} files; ${need} are needed (raise ulimit -n)`).toBeGreaterThanOrEqual(need);
      const clientLimit = Math.min(hard, need * 2);
      expect(hard, `the hard fd limit (${hard}) is below what the load client needs (${need})`).toBeGreaterThanOrEqual(need);

      // maxStreamDurationMs: the Next example ends streams after 55 s by default; these must stay idle.
      sut = await adapter.start({ keepAliveMs: 1_000, maxSessions: IDLE_STREAMS + 100, maxStreamDurationMs: 3_600_000 });
      const serverPid = sut.inProcess ? process.pid : listenerPid(Number(new URL(sut.url).port));
      collect();
      const before = rssOf(serverPid);
      const heapBefore = process.memoryUsage().heapUsed;
      const script = fileURLToPath(new URL('./load-client.mjs', import.meta.url));
      const child = spawn(
        'bash',
        [
          '-c',
          `ulimit -n ${clientLimit} && exec "${process.execPath}" "${script}" "$@"`,
          'load-client',
          sut.url,
          String(IDLE_STREAMS),
          '2',
        ],
        {
          stdio: ['pipe', 'pipe', 'pipe'],
        },
      );
      const next = lines(child);
      try {
        const opened = await next(LONG ? 600_000 : 60_000);
        expect(opened.opened).toBe(IDLE_STREAMS);
        const flowing = await next(60_000);
        expect(flowing.keepAlives.min).toBeGreaterThanOrEqual(2);
        collect();
        const after = rssOf(serverPid);
        if (sut.inProcess) expect(sut.inProcess.handler.sessionCount).toBe(IDLE_STREAMS);
        const heap = sut.inProcess ? `; heap +${mb(process.memoryUsage().heapUsed - heapBefore)} MB` : ' (next start process)';
        const rss =
          before !== undefined && after !== undefined
            ? `server RSS ${mb(before)} → ${mb(after)} MB (+${mb(after - before)} MB, ${Math.round((after - before) / IDLE_STREAMS / 1024)} KiB per session with its stream${heap})`
            : 'server RSS n/a';
        console.log(
          `[idle ${adapter.name}] ${IDLE_STREAMS} streams opened in ${opened.ms} ms (fd limits: this process ${soft}, client ${clientLimit}); every stream got ≥ 2 keep-alives within ${flowing.ms} ms; ${rss}`,
        );
      } finally {
        const exited = new Promise((resolve) => (child.exitCode !== null ? resolve(undefined) : child.once('exit', resolve)));
        child.stdin!.end();
        // It exits when stdin ends; if it is stuck, stop it by its pid.
        const stuck = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(stuck);
      }
    },
    LONG ? 900_000 : 90_000,
  );

  it(
    `${CONCURRENT_CALLS} concurrent long_task calls polling with closeEvery all complete with every event, once, in order`,
    async () => {
      sut = await adapter.start({ retryMs: 50 });
      const perSession = 10;
      const sessions = await Promise.all(Array.from({ length: Math.ceil(CONCURRENT_CALLS / perSession) }, () => RawSession.open(sut!.url)));
      const args = { steps: 20, intervalMs: 25, closeEvery: 5, retryMs: 50 };
      const started = performance.now();
      const calls = await Promise.all(
        Array.from({ length: CONCURRENT_CALLS }, (_, i) => pollCall(sessions[i % sessions.length]!, 100 + i, args)),
      );
      const ms = Math.round(performance.now() - started);
      const steps = Array.from({ length: args.steps }, (_, i) => i + 1);
      for (const [i, call] of calls.entries()) {
        expect(call.steps, `call ${i}`).toEqual(steps);
        expect(call.results.map((r) => r.id)).toEqual([100 + i]);
        expect(call.results[0].result.content[0].text).toBe(`completed ${args.steps} steps`);
      }
      const connections = calls.reduce((n, c) => n + c.connections, 0);
      console.log(
        `[concurrent ${adapter.name}] ${CONCURRENT_CALLS} calls × ${args.steps} steps (${CONCURRENT_CALLS * (args.steps + 1)} events, ${connections} connections) all complete in ${ms} ms`,
      );
      expect(sut.errors).toEqual([]);
    },
    LONG ? 600_000 : 60_000,
  );

  it('a storm of initializes at the session cap lets only idle sessions go: a session with a running call keeps working, refusals are 503 with Retry-After', async () => {
    const cap = 40;
    sut = await adapter.start({ maxSessions: cap, retryMs: 20 });
    const inside = await RawSession.open(sut.url);
    const args = { steps: 12, intervalMs: 20, closeEvery: 3, retryMs: 20 };
    // The call is running (its stream is open) before the storm starts.
    const working = pollCall(inside, 1, args, await inside.postSse(toolCall(1, 'long_task', args)));
    const storm = await Promise.all(
      Array.from({ length: cap * 2 }, async (_, i) => {
        const res = await RawSse.open(sut!.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': PROTOCOL },
          body: JSON.stringify(initialize(i)),
        });
        await res.end();
        return res;
      }),
    );
    const admitted = storm.filter((r) => r.status === 200);
    const refused = storm.filter((r) => r.status !== 200);
    // Idle sessions make room, so far more than the cap get in; a refusal happens only at an instant
    // when every session under the cap was busy (mid-initialize).
    expect(admitted.length).toBeGreaterThanOrEqual(cap);
    for (const r of refused) {
      expect(r.status).toBe(503);
      expect(Number(r.headers['retry-after'])).toBeGreaterThan(0);
      expect(jsonRpcError({ status: r.status, headers: r.headers, text: r.raw })).toMatchObject({
        code: -32000,
        message: expect.stringMatching(/session limit/),
      });
    }
    const call = await working;
    expect(call.steps).toEqual(Array.from({ length: args.steps }, (_, i) => i + 1));
    expect(call.results).toHaveLength(1);
    // Everything under the cap is idle now: a newcomer gets in, and the busy session was never let go.
    const late = await RawSession.open(sut.url);
    expect(late.sessionId).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect((await inside.post(toolCall(2, 'test_simple_text'))).status).toBe(200);
    // The cap held: of the sessions the storm opened, no more are still served than fit beside the
    // busy one and the newcomer; the others were let go to make room (404, 2025-11-25 "Session
    // Management"). Asked last: a request makes a session recent, and would change whom the
    // newcomer pushes out.
    const statuses = await Promise.all(
      admitted.map(
        async (r) =>
          (await new RawSession(sut!.url, r.headers['mcp-session-id'] as string).post({ jsonrpc: '2.0', id: 1, method: 'ping' })).status,
      ),
    );
    const alive = statuses.filter((s) => s === 200).length;
    expect(alive + statuses.filter((s) => s === 404).length, `statuses ${statuses.join(' ')}`).toBe(admitted.length);
    expect(alive, `storm sessions still served, beside the busy one and the newcomer, at a cap of ${cap}`).toBeLessThanOrEqual(cap - 2);
    if (sut.inProcess) expect(sut.inProcess.handler.sessionCount).toBeLessThanOrEqual(cap);
  });
});
