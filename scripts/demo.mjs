#!/usr/bin/env node
// SEP-1699 (SSE polling) demo, then the same tool for a 2026-07-28 client (demo-modern.mjs): as a
// task it polls, and on one stream. Starts apps/express-example, calls its `long_task` tool with the
// SDK's own Client + StreamableHTTPClientTransport, and prints the HTTP/SSE traffic as it happens.
// The transport gets a `fetch` that tees every SSE body: one branch goes to the SDK untouched, the
// other is parsed here, so what is printed is exactly what the SDK read.
//
//   npx -y pnpm@10.34.9 build && node scripts/demo.mjs [--keep]
//
// The app also serves a live page of its sessions, streams and polls (/mcp-kit/live): the demo
// prints its address first, so a browser can watch the calls; --keep leaves the server up after
// them (Ctrl-C stops it). PORT picks the port (default: a free one).
//
// Exits 0 only if every step arrived exactly once (on the wire and through the SDK), every result
// arrived, and the server really closed the streams; 1 otherwise (130 on Ctrl-C).
import { spawn } from 'node:child_process';
import { connect, createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { modernDemo } from './demo-modern.mjs';

// Two calls, so that two different closes ask for two different paces. retryMs < closeEvery *
// intervalMs, so we are back before the next close (a close while nobody is connected closes
// nothing); and retryMs is not a multiple of intervalMs, so a reconnect never lands on a step.
const CALLS = [
  { steps: 12, intervalMs: 400, closeEvery: 4, retryMs: 1500 },
  { steps: 12, intervalMs: 250, closeEvery: 4, retryMs: 600 },
];
// REPLAYED vs LIVE, on a resumed stream: the server writes the priming event and all stored events
// in one go, so the replay arrives as one back-to-back burst, while the tool produces live events
// only every `intervalMs` (>= 250 ms here). Events following the priming event with no gap over
// BURST_GAP_MS are REPLAYED; from the first pause on, everything is LIVE. (The reconnect never
// lands within BURST_GAP_MS of a step, see above, so no live step can hide in the burst; the
// "away … ≈ N steps" line after each resume lets you check the count.)
const BURST_GAP_MS = 25;
const KEEP = process.argv.includes('--keep');
let keptPort;
const DEADLINE_MS = 45_000;
// The 2026-07-28 calls (demo-modern.mjs): the same tool, as a task, then on one stream.
const MODERN_CALL = { steps: 8, intervalMs: 250, closeEvery: 4, retryMs: 600 };

const root = fileURLToPath(new URL('..', import.meta.url));
const tty = Boolean(process.stdout.isTTY) && !process.env.NO_COLOR;
const paint = (code) => (s) => (tty ? `\x1b[${code}m${s}\x1b[0m` : String(s));
const [dim, bold, red, green, yellow, cyan, magenta] = [2, 1, 31, 32, 33, 36, 35].map(paint);
const t0 = performance.now();
const now = () => performance.now();
const out = (tag, line) => console.log(`${dim(`+${((now() - t0) / 1000).toFixed(3)}s`)}  ${dim(tag.padEnd(10))} ${line}`.trimEnd());
const shortId = (id) => (id.length > 12 ? `…${id.slice(id.lastIndexOf('.') - 4)}` : id);
const contiguous = (a) => a.every((v, i) => i === 0 || v === a[i - 1] + 1);
const range = (a) => (a.length === 0 ? 'none' : a.length === 1 ? `${a[0]}` : contiguous(a) ? `${a[0]}–${a.at(-1)}` : a.join(','));
const ms = (n) => `${Math.round(n)} ms`;

// ---- reading the wire ---------------------------------------------------------------------------
let current; // the long_task call in progress
const calls = [];
const streamOfEventId = new Map(); // every event id seen → the stream (response) it came on
const open = new Set(); // streams whose body is still being read

// One SSE event (a block ended by a blank line) on `stream`.
function onSseEvent(stream, { id, data, retry }) {
  const at = now();
  if (id !== undefined) {
    stream.lastId = id;
    streamOfEventId.set(id, stream);
  }
  if (data === '' && id !== undefined) {
    const r = stream.resume;
    const echo = !r ? '' : id === r.from ? dim('  (= our Last-Event-ID)') : red('  (≠ our Last-Event-ID!)');
    out(stream.tag, `   ${cyan('priming event')} id=${shortId(id)}${retry === undefined ? '' : ` retry=${retry}`}${echo}`);
    stream.lastAt = at;
    return;
  }
  if (data === '') {
    if (retry !== undefined) {
      stream.closeRetry = retry;
      out(stream.tag, `   ${yellow(`server set retry: ${retry} ms`)}`);
    }
    return;
  }
  const call = stream.call;
  if (call && id !== undefined) {
    if (call.ids.has(id)) call.dupIds++;
    call.ids.add(id);
  }
  let label = '';
  const r = stream.resume;
  if (r) {
    r.inBurst &&= at - stream.lastAt <= BURST_GAP_MS;
    label = r.inBurst ? magenta('REPLAYED') : green('LIVE');
  }
  stream.lastAt = at;
  const msg = JSON.parse(data);
  let what = msg.method ?? '';
  if (msg.method === 'notifications/message' && typeof msg.params?.data?.step === 'number') {
    const step = msg.params.data.step;
    what = `log step ${step}`;
    if (call) call.step(step).wire++;
    if (r) (r.inBurst ? r.replayed : r.live).push(step);
  } else if (msg.method === 'notifications/progress') {
    what = `progress ${msg.params.progress}/${msg.params.total}`;
    if (call) call.wireProgress++;
  } else if (msg.error) {
    what = red(`error: ${msg.error.message}`);
    stream.gotResponse = true;
  } else if (msg.result) {
    const res = msg.result;
    what = res.content
      ? `result: ${res.content.map((c) => c.text).join(' ')}`
      : res.serverInfo
        ? `result: initialize (${res.serverInfo.name})`
        : 'result';
    stream.gotResponse = true;
    if (call) call.wireResults++;
  }
  out(stream.tag, `   event id=${(id === undefined ? '(none)' : shortId(id)).padEnd(9)} ${what.padEnd(26)} ${label}`);
}

// Reads our branch of an SSE body, parsing fields per the SSE spec (id, data, retry, `:` comments).
async function watchSse(body, stream) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let ev = {};
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      const lines = buffer.split(/\r\n|\r|\n/);
      buffer = lines.pop();
      for (const line of lines) {
        if (line === '') {
          onSseEvent(stream, { ...ev, data: ev.data ?? '' });
          ev = {};
        } else if (line.startsWith(':')) out(stream.tag, `   ${dim(`comment "${line}" (keep-alive)`)}`);
        else {
          const i = line.indexOf(':');
          const field = i < 0 ? line : line.slice(0, i);
          const val = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
          if (field === 'data') ev.data = ev.data === undefined ? val : `${ev.data}\n${val}`;
          else if (field === 'id') ev.id = val;
          else if (field === 'retry' && /^\d+$/.test(val)) ev.retry = Number(val);
        }
      }
    }
    if (stream.gotResponse) out(stream.tag, `   ${dim('server ended the stream after the response')}`);
    else {
      stream.closedAt = now();
      if (stream.call) stream.call.closes++;
      const why = stream.call
        ? `  (tool still running; we hold Last-Event-ID ${shortId(stream.lastId)})`
        : stopping
          ? '  (server shutting down)'
          : '  (the session ended)';
      out(stream.tag, `   ${yellow('server closed the stream')}${dim(why)}`);
    }
    const r = stream.resume;
    if (r && stream.call) {
      const away = r.openedAt - r.leftAt;
      out(
        stream.tag,
        dim(
          `   ↳ away ${ms(away)} ≈ ${(away / stream.call.args.intervalMs).toFixed(1)} tool steps: ` +
            `replayed steps ${range(r.replayed)}, live steps ${range(r.live)}`,
        ),
      );
    }
  } catch (error) {
    if (!stream.closedByUs) out(stream.tag, red(`   stream broke: ${error?.message ?? error}`));
  } finally {
    open.delete(stream);
  }
}

// The fetch the SDK transport uses: prints each request and response, tees SSE bodies to watchSse.
async function tracingFetch(url, init = {}) {
  const method = init.method ?? 'GET';
  const lastEventId = new Headers(init.headers).get('last-event-id') ?? undefined;
  const stream = { tag: 'session' };
  if (method === 'POST') {
    const body = JSON.parse(String(init.body));
    const m = Array.isArray(body) ? body.map((x) => x.method).join(',') : body.method;
    if (m === 'tools/call') Object.assign(stream, { tag: current.tag, call: current });
    else if (m.endsWith('initialize') || m.endsWith('initialized')) stream.tag = 'init';
    out(stream.tag, `${bold('→ POST')} ${m}${m === 'tools/call' ? ` ${body.params.name}` : ''}`);
  } else if (method === 'GET' && lastEventId) {
    const prev = streamOfEventId.get(lastEventId);
    Object.assign(stream, { tag: prev?.tag ?? 'resume', call: prev?.call });
    const waited = prev?.closedAt === undefined ? undefined : now() - prev.closedAt;
    stream.resume = { from: lastEventId, leftAt: prev?.closedAt, inBurst: true, replayed: [], live: [] };
    if (stream.call && waited !== undefined) stream.call.waits.push({ waited, asked: prev.closeRetry });
    const wait = waited === undefined ? '' : yellow(`  after waiting ${ms(waited)} (server asked for ${prev.closeRetry ?? '?'} ms)`);
    out(stream.tag, `${bold('→ GET ')} (resume) Last-Event-ID: ${shortId(lastEventId)}${wait}`);
  } else {
    if (method === 'GET') stream.tag = 'standalone';
    const what =
      method === 'GET' ? '(standalone stream, for server messages tied to no request)' : method === 'DELETE' ? '(end the session)' : '';
    out(stream.tag, `${bold(`→ ${method.padEnd(4)}`)} ${what}`);
  }

  const res = await fetch(url, init);
  const type = res.headers.get('content-type') ?? '';
  if (!type.startsWith('text/event-stream') || !res.body) {
    out(stream.tag, `${bold('←')} ${res.status} ${type || dim('(no body)')}`);
    return res;
  }
  out(stream.tag, `${bold('←')} ${res.status} text/event-stream: ${green('stream opened')}`);
  if (stream.resume) stream.resume.openedAt = now();
  const [forSdk, forUs] = res.body.tee();
  open.add(stream);
  init.signal?.addEventListener('abort', () => (stream.closedByUs = true), { once: true });
  void watchSse(forUs, stream);
  const copy = new Response(forSdk, { status: res.status, statusText: res.statusText, headers: res.headers });
  Object.defineProperty(copy, 'url', { value: res.url });
  return copy;
}

// ---- the server child process -------------------------------------------------------------------
let child;
let stopping = false;
const alive = () => child?.pid !== undefined && child.exitCode === null && child.signalCode === null;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer().once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}
async function waitForPort(port, timeoutMs) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (!alive()) throw new Error(`the server exited early (code ${child.exitCode ?? child.signalCode})`);
    const up = await new Promise((r) => {
      const sock = connect(port, '127.0.0.1', () => (sock.end(), r(true))).once('error', () => r(false));
    });
    if (up) return;
    if (Date.now() > until) throw new Error(`the server did not listen on ${port} within ${timeoutMs} ms`);
    await sleep(50);
  }
}
function signalChild(signal) {
  if (!alive()) return;
  try {
    process.kill(child.pid, signal);
  } catch {
    // already gone
  }
}
async function stopChild() {
  stopping = true;
  if (!alive()) return;
  const exited = new Promise((r) => child.once('exit', r));
  signalChild('SIGTERM');
  const timer = setTimeout(() => signalChild('SIGKILL'), 2000);
  await exited;
  clearTimeout(timer);
}
process.on('exit', () => signalChild('SIGKILL'));
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.once(sig, () => {
    console.log(`\n${sig}: stopping the server (pid ${child?.pid ?? '-'})`);
    void stopChild().finally(() => process.exit(130));
  });
}

// ---- the demo -----------------------------------------------------------------------------------
async function main() {
  console.log(bold("SEP-1699: an MCP server may close a request's SSE stream on purpose, mid-request."));
  console.log('Every stream opens with a priming event (an id, empty data), so the client holds a Last-Event-ID');
  console.log('from the start. To let go, the server writes `retry: <ms>` and ends the response; the client waits');
  console.log('that long, reconnects with GET + Last-Event-ID, gets what it missed replayed from the event store,');
  console.log("and the stream goes on live. Watch each close's retry, the real wait, and that no step is lost.");
  console.log(
    dim(`Legend, on resumed streams: ${magenta('REPLAYED')} = in the burst right behind the priming event (no gap > ${BURST_GAP_MS} ms),`),
  );
  console.log(dim(`i.e. stored while we were away; ${green('LIVE')} = from the first pause on, sent as the tool produced it.`));
  console.log();

  const port = Number(process.env.PORT) || (await freePort());
  child = spawn(process.execPath, ['apps/express-example/dist/server.js'], {
    cwd: root,
    env: { ...process.env, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout.on('data', (d) => out('server', dim(String(d).trim())));
  child.stderr.on('data', (d) => out('server', red(String(d).trim())));
  child.once('exit', (code, signal) => {
    if (stopping) return;
    console.error(red(`the server (pid ${child.pid}) died: ${signal ?? `exit code ${code}`}`));
    process.exit(1);
  });
  await waitForPort(port, 10_000);
  keptPort = port;
  out('server', dim(`pid ${child.pid}, listening on 127.0.0.1:${port}`));
  console.log(
    `\n${bold('Live page:')} ${cyan(`http://127.0.0.1:${port}/mcp-kit/live`)}  (sessions, streams, closes and polls as they happen)\n`,
  );

  const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${port}/mcp`), { fetch: tracingFetch });
  const client = new Client({ name: 'sep-1699-demo', version: '1.0.0' });
  // What the SDK hands the application, counted apart from what we parsed on the wire.
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    if (current && typeof n.params.data?.step === 'number') current.step(n.params.data.step).sdk++;
  });
  await client.connect(transport);
  await sleep(50); // let the standalone GET open before the first call, for a tidier log

  for (const [i, args] of CALLS.entries()) {
    const steps = new Map();
    const call = {
      tag: `call ${i + 1}`,
      args,
      steps,
      ids: new Set(),
      dupIds: 0,
      closes: 0,
      waits: [],
      wireProgress: 0,
      sdkProgress: 0,
      wireResults: 0,
      result: undefined,
      step: (n) => steps.get(n) ?? steps.set(n, { wire: 0, sdk: 0 }).get(n),
    };
    current = call;
    calls.push(call);
    console.log();
    console.log(bold(`── call ${i + 1}: long_task ${JSON.stringify(args)} + a progress token ──`));
    console.log(
      dim(
        `   a step every ${args.intervalMs} ms; after every ${args.closeEvery} steps the server closes the stream, asking for retry ${args.retryMs} ms`,
      ),
    );
    const result = await client.callTool({ name: 'long_task', arguments: args }, undefined, {
      onprogress: () => call.sdkProgress++,
      timeout: DEADLINE_MS,
    });
    call.result = result.content?.[0]?.text;
    // The stream carrying the result must end right after it; give our reader a moment to see that.
    for (let t = 0; t < 100 && [...open].some((s) => s.call === call); t++) await sleep(10);
    call.lingering = [...open].some((s) => s.call === call);
    if (call.lingering) out(call.tag, red('   ⚠ the stream is still open 1 s after the result'));
  }

  console.log();
  await transport.terminateSession();
  for (const s of open) s.closedByUs = true;
  await client.close();
  const modern = await modernDemo(`http://127.0.0.1:${port}/mcp`, MODERN_CALL, {
    out,
    paint: { bold, dim, green, red, yellow, cyan },
    ms,
  });
  return summarize(modern);
}

function summarize(modern) {
  console.log();
  console.log(bold('── summary ──'));
  let ok = true;
  for (const c of calls) {
    const n = c.args.steps;
    // A step counts once it was on the wire AND handed to the application by the SDK.
    const missing = [];
    const dups = [];
    let logs = 0;
    for (let s = 1; s <= n; s++) {
      const seen = c.steps.get(s) ?? { wire: 0, sdk: 0 };
      logs += seen.wire;
      if (seen.wire === 0 || seen.sdk === 0) missing.push(s);
      if (seen.wire > 1 || seen.sdk > 1) dups.push(s);
    }
    const stray = [...c.steps.keys()].filter((s) => s < 1 || s > n);
    const resultOk = c.result === `completed ${n} steps` && c.wireResults === 1;
    const good =
      dups.length === 0 &&
      missing.length === 0 &&
      stray.length === 0 &&
      c.dupIds === 0 &&
      resultOk &&
      c.wireProgress === n &&
      c.sdkProgress === n &&
      c.closes >= 1 &&
      c.waits.length === c.closes;
    ok &&= good;
    const list = (a) => (a.length ? ` (step ${a.join(', ')})` : '');
    console.log(
      `${good ? green('✔') : red('✘')} ${c.tag}: ${c.ids.size} events (${logs} log, ${c.wireProgress} progress, ${c.wireResults} result), ` +
        `duplicates ${dups.length + c.dupIds}${list(dups)}, missing ${missing.length}${list(missing)}` +
        `${stray.length ? `, unexpected${list(stray)}` : ''}, result ${resultOk ? JSON.stringify(c.result) : red(`missing or wrong (${c.result})`)}`,
    );
    const waits = c.waits.map((w) => `${ms(w.waited)} (asked ${w.asked} ms)`).join(', ');
    console.log(`    server closes ${c.closes}, reconnections ${c.waits.length}; measured reconnect delays: ${waits || 'none'}`);
    if (c.lingering) console.log(yellow('    ⚠ the stream with the result did not end right after it'));
  }
  for (const m of modern) {
    ok &&= m.ok;
    console.log(`${m.ok ? green('✔') : red('✘')} ${m.tag}: ${m.detail}`);
  }
  const closes = calls.reduce((sum, c) => sum + c.closes, 0);
  console.log(
    ok
      ? green(
          `OK: every step arrived exactly once, although the server hung up ${closes} times mid-call; the 2026 client got the same tool's result as a task, and on one stream.`,
        )
      : red('FAILED: see ✘ above.'),
  );
  return ok;
}

const deadline = setTimeout(() => {
  console.error(red(`the demo did not finish within ${DEADLINE_MS} ms`));
  void stopChild().finally(() => process.exit(1));
}, DEADLINE_MS);
deadline.unref();

main()
  .then(async (ok) => {
    clearTimeout(deadline);
    if (KEEP) {
      console.log(`\nThe server stays up for the live page: ${cyan(`http://127.0.0.1:${keptPort}/mcp-kit/live`)} (Ctrl-C stops it).`);
      return;
    }
    await stopChild();
    process.exit(ok ? 0 : 1);
  })
  .catch(async (error) => {
    console.error(red(`demo failed: ${error?.stack ?? error}`));
    await stopChild();
    process.exit(1);
  });
