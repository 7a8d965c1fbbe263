// The benchmark's control plane, served beside /mcp by every server process under /bench/*:
// memory and CPU readings from inside the process, filling the event store, and the server-side
// time of each resume. None of it runs on the measured MCP path except `trackResume`.
import { performance } from 'node:perf_hooks';
import { writeHeapSnapshot } from 'node:v8';

// On globalThis: Next bundles each route separately, and every route must see the same list.
const resumeTimings = (globalThis[Symbol.for('mcp-kit-bench:resume-timings')] ??= []);

/** Memory and CPU of this process, after a full GC when the process runs with --expose-gc. */
export function stats(collect = true) {
  if (collect && typeof globalThis.gc === 'function') {
    for (let i = 0; i < 3; i++) globalThis.gc();
  }
  const m = process.memoryUsage();
  const cpu = process.cpuUsage();
  return {
    pid: process.pid,
    rss: m.rss,
    heapUsed: m.heapUsed,
    heapTotal: m.heapTotal,
    external: m.external,
    arrayBuffers: m.arrayBuffers,
    cpuUserUs: cpu.user,
    cpuSystemUs: cpu.system,
    gc: typeof globalThis.gc === 'function',
  };
}

/** Server-side milliseconds of the resumes since the last call, oldest first. */
export function takeResumeTimings() {
  return resumeTimings.splice(0, resumeTimings.length);
}

export function recordResumeTiming(ms) {
  resumeTimings.push(ms);
  if (resumeTimings.length > 100_000) resumeTimings.splice(0, 50_000);
}

/**
 * Times a `GET` + `Last-Event-ID` on node:http: from the request reaching the app to the last byte
 * the server hands to the socket before the response ends or the client hangs up (the SDK keeps a
 * replayed stream open, so "the response finished" is not available for every server).
 */
export function trackResume(req, res) {
  if (req.method !== 'GET' || !req.headers['last-event-id']) return;
  const start = performance.now();
  let last = 0;
  const write = res.write;
  const end = res.end;
  res.write = function (...args) {
    const r = write.apply(this, args);
    last = performance.now();
    return r;
  };
  res.end = function (...args) {
    const r = end.apply(this, args);
    if (last === 0 || (args.length > 0 && args[0] !== null && args[0] !== undefined && typeof args[0] !== 'function'))
      last = performance.now();
    return r;
  };
  res.once('close', () => {
    if (last > 0) recordResumeTiming(last - start);
  });
}

/**
 * The same for a fetch-style route (Next): from `start` to the last chunk the response body hands
 * on before it ends or the client hangs up.
 */
export function trackResumeResponse(response, start) {
  if (!response.body) return response;
  const reader = response.body.getReader();
  let last = 0;
  let recorded = false;
  const record = () => {
    if (recorded || last === 0) return;
    recorded = true;
    recordResumeTiming(last - start);
  };
  const body = new ReadableStream(
    {
      async pull(controller) {
        const { value, done } = await reader.read();
        if (done) {
          record();
          controller.close();
          return;
        }
        last = performance.now();
        controller.enqueue(value);
      },
      cancel(reason) {
        record();
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
  return new Response(body, { status: response.status, headers: response.headers });
}

/**
 * The bench's own test (test/verdict.test.ts) needs servers that really fail:
 * `BENCH_SABOTAGE=<server name>` makes that server hang up on every MCP request, and
 * `<server name>:start` makes it exit before it listens. Never set by a run.
 */
const [sabotaged, sabotagePhase] = (process.env.BENCH_SABOTAGE ?? '').split(':');
const SABOTAGED = sabotaged !== '' && sabotaged === process.env.BENCH_SERVER;
if (SABOTAGED && sabotagePhase === 'start') {
  console.error(`BENCH_SABOTAGE: ${sabotaged} exits before it listens`);
  process.exit(3);
}

/**
 * Serves `/bench/*` on node:http. `fill(events)` puts that many ~100-byte events of other sessions
 * and streams into the server's event store; `sessions()` (mcp-kit) adds session counts to the
 * stats; `auth` (the kit-express-auth row, servers/auth.mjs) serves its JWKS and a token. Returns
 * false for any other path.
 */
export function handleControl(req, res, { fill, sessions, auth }) {
  const url = req.url ?? '';
  if (SABOTAGED && !url.startsWith('/bench/')) {
    req.socket.destroy();
    return true;
  }
  if (!url.startsWith('/bench/')) return false;
  const reply = (status, body) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  const { pathname, searchParams } = new URL(url, 'http://x');
  Promise.resolve()
    .then(async () => {
      if (pathname === '/bench/stats') return reply(200, { ...stats(!searchParams.has('nogc')), ...sessions?.() });
      if (auth && pathname === '/bench/jwks') return reply(200, auth.jwks);
      if (auth && pathname === '/bench/token') return reply(200, { token: await auth.token() });
      if (pathname === '/bench/resume-timings') return reply(200, { timings: takeResumeTimings() });
      // For profiling by hand: `curl -X POST '<origin>/bench/heap-snapshot?file=/tmp/x.heapsnapshot'`.
      if (pathname === '/bench/heap-snapshot') return reply(200, { file: writeHeapSnapshot(searchParams.get('file') ?? undefined) });
      if (pathname === '/bench/fill') {
        const events = Number(searchParams.get('events') ?? 0);
        const started = performance.now();
        const filled = await fill(events);
        return reply(200, { events, ms: performance.now() - started, ...filled });
      }
      return reply(404, { error: `unknown control path ${pathname}` });
    })
    .catch((error) => reply(500, { error: String(error?.stack ?? error) }));
  return true;
}

/** What one filler event looks like: a log notification of the same size as a burst event. */
export const FILL_MESSAGE = {
  method: 'notifications/message',
  params: { level: 'info', logger: 'bench', data: 'fill-fill-fill-fill' },
  jsonrpc: '2.0',
};

/** Streams of this many events each, ten streams per session: "other streams and sessions". */
export const FILL_EVENTS_PER_STREAM = 1_000;
export const FILL_STREAMS_PER_SESSION = 10;

/** Exits normally on SIGTERM, so `--cpu-prof` gets to write its profile. */
export function exitOnSigterm() {
  process.once('SIGTERM', () => process.exit(0));
}
