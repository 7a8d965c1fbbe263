// The physical limit: node:http writing the same SSE frames (priming event, `id:` per event, one
// JSON.stringify per message) with no MCP logic: no schema validation, no McpServer, no rules. It
// knows just enough of the benchmark's calls to answer them, and keeps every frame of a stream in
// an array so the resume and polling workloads have something to replay. Like mcp-kit's node
// bridge, it sends what one turn of the event loop wrote as one chunk when the turn ends. A
// 2026-07-28 request (envelope in `_meta`) gets the canned tools/call result as one JSON body.
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import express from 'express';
import { FILL_EVENTS_PER_STREAM, FILL_MESSAGE, exitOnSigterm, handleControl, trackResume } from './control.mjs';
import { BURST_PAYLOAD, BURST_YIELD_EVERY, benchEnv } from './tools.mjs';

const env = benchEnv();
const SSE_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache, no-transform', 'x-accel-buffering': 'no' };
const PROTOCOL_VERSION = '2025-11-25';
/** A body whose `_meta` carries this key is a 2026-07-28 request: no session, one JSON answer. */
const MODERN_VERSION_KEY = 'io.modelcontextprotocol/protocolVersion';
const MODERN_RESULT_META = { 'io.modelcontextprotocol/serverInfo': { name: 'bench-bare', version: '0.0.0' } };

/** streamId → { frames: string[] (frames[i] has seq i + 1), out (the live connection), complete } */
const streams = new Map();
const sessions = new Set();

const id = () => randomBytes(16).toString('base64url');
const yieldToLoop = () => new Promise((resolve) => setImmediate(resolve));

/** One chunk per turn of the event loop, headers included (what mcp-kit's node bridge does). */
function sink(res) {
  let pending = '';
  let scheduled = false;
  let started = false;
  const send = () => {
    scheduled = false;
    if (res.writableEnded || res.destroyed) return;
    if (pending === '') {
      if (!started) res.flushHeaders();
    } else {
      const chunk = pending;
      pending = '';
      res.write(chunk);
    }
    started = true;
  };
  const out = {
    res,
    write(frame) {
      pending += frame;
      if (!scheduled) {
        scheduled = true;
        setImmediate(send);
      }
    },
    end(last = '') {
      const chunk = pending + last;
      pending = '';
      if (res.writableEnded) return;
      if (chunk) res.end(chunk);
      else res.end();
    },
  };
  res.socket?.setNoDelay(true);
  out.write('');
  return out;
}

function openStream(res, sessionId) {
  const stream = { id: id(), frames: [], out: undefined, complete: false };
  streams.set(stream.id, stream);
  res.writeHead(200, { ...SSE_HEADERS, 'mcp-session-id': sessionId });
  attach(stream, sink(res));
  stream.out.write(`id: ${stream.id}.0\nretry: ${env.retryMs}\ndata: \n\n`);
  return stream;
}

function attach(stream, out) {
  stream.out = out;
  out.res.once('close', () => {
    if (stream.out === out) stream.out = undefined;
  });
}

function emit(stream, message, final = false) {
  const frame = `id: ${stream.id}.${stream.frames.length + 1}\ndata: ${JSON.stringify(message)}\n\n`;
  stream.frames.push(frame);
  stream.out?.write(frame);
  if (final) {
    stream.complete = true;
    stream.out?.end();
  }
}

function result(rpcId, value) {
  return { result: value, jsonrpc: '2.0', id: rpcId };
}

function text(value) {
  return { content: [{ type: 'text', text: value }] };
}

const INIT_RESULT = {
  protocolVersion: PROTOCOL_VERSION,
  capabilities: { logging: {}, tools: { listChanged: true } },
  serverInfo: { name: 'bench-bare', version: '0.0.0' },
};

async function runTool(stream, message) {
  const { name, arguments: args = {} } = message.params;
  if (name === 'bench_burst') {
    for (let i = 1; i <= args.count; i++) {
      emit(stream, {
        method: 'notifications/message',
        params: { level: 'info', logger: 'bench', data: `${BURST_PAYLOAD}${i % 10_000}` },
        jsonrpc: '2.0',
      });
      if (i % BURST_YIELD_EVERY === 0) await yieldToLoop();
    }
    return text(`burst ${args.count}`);
  }
  if (name === 'long_task') {
    const { steps, intervalMs, closeEvery, retryMs } = args;
    for (let step = 1; step <= steps; step++) {
      emit(stream, { method: 'notifications/message', params: { level: 'info', logger: 'long_task', data: { step } }, jsonrpc: '2.0' });
      if (step === steps) break;
      if (closeEvery !== undefined && step % closeEvery === 0 && stream.out) {
        const out = stream.out;
        stream.out = undefined;
        out.end(`retry: ${retryMs ?? env.retryMs}\n\n`);
      }
      if (intervalMs > 0) await new Promise((resolve) => setTimeout(resolve, intervalMs));
      else if (step % 64 === 0) await yieldToLoop();
    }
    return text(`completed ${steps} steps`);
  }
  return text('This is a simple text response for testing.');
}

async function post(req, res) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const message = JSON.parse(Buffer.concat(chunks).toString('utf8'));
  if (message.id === undefined) {
    res.writeHead(202).end();
    return;
  }
  if (message.params?._meta?.[MODERN_VERSION_KEY] !== undefined) {
    // The shape mcp-kit and the SDK answer a 2026 tools/call with (resultType, serverInfo).
    const value = { ...text('This is a simple text response for testing.'), resultType: 'complete', _meta: MODERN_RESULT_META };
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(result(message.id, value)));
    return;
  }
  let sessionId = req.headers['mcp-session-id'];
  let value;
  if (message.method === 'initialize') {
    sessionId = id();
    sessions.add(sessionId);
    value = INIT_RESULT;
  }
  if (env.json) {
    if (message.method === 'tools/call') value = await runTool({ id: '', frames: [], out: undefined }, message);
    res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': sessionId });
    res.end(JSON.stringify(result(message.id, value ?? {})));
    return;
  }
  const stream = openStream(res, sessionId);
  if (message.method === 'tools/call') value = await runTool(stream, message);
  emit(stream, result(message.id, value ?? {}), true);
}

function get(req, res) {
  const sessionId = req.headers['mcp-session-id'];
  const lastEventId = req.headers['last-event-id'];
  if (!lastEventId) {
    openStream(res, sessionId);
    return;
  }
  const dot = lastEventId.lastIndexOf('.');
  const stream = streams.get(lastEventId.slice(0, dot));
  if (!stream) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { ...SSE_HEADERS, 'mcp-session-id': sessionId });
  const out = sink(res);
  out.write(`id: ${lastEventId}\nretry: ${env.retryMs}\ndata: \n\n`);
  for (let i = Number(lastEventId.slice(dot + 1)); i < stream.frames.length; i++) out.write(stream.frames[i]);
  if (stream.complete) {
    out.end();
    return;
  }
  stream.out?.end();
  attach(stream, out);
}

function fill(events) {
  let left = events;
  while (left > 0) {
    const stream = { id: id(), frames: [], out: undefined, complete: false };
    streams.set(stream.id, stream);
    const n = Math.min(FILL_EVENTS_PER_STREAM, left);
    for (let seq = 1; seq <= n; seq++) {
      stream.frames.push(
        `id: ${stream.id}.${seq}\ndata: ${JSON.stringify({ ...FILL_MESSAGE, params: { ...FILL_MESSAGE.params, seq } })}\n\n`,
      );
    }
    left -= n;
  }
  return { streams: streams.size };
}

function serve(req, res) {
  const fail = (error) => {
    if (!res.headersSent) res.writeHead(500);
    res.end(String(error));
  };
  if (req.method === 'POST') post(req, res).catch(fail);
  else if (req.method === 'GET') get(req, res);
  else if (req.method === 'DELETE') res.writeHead(200).end();
  else res.writeHead(405).end();
}

function control(req, res, next) {
  if (handleControl(req, res, { fill })) return;
  trackResume(req, res);
  next();
}

let server;
if (process.env.BARE_FRAMEWORK === 'express') {
  // The floor of Express: the same handler mounted the way mcp-kit and the SDK server are.
  const app = express();
  app.use(control);
  app.use('/mcp', serve);
  server = app.listen(env.port, env.host, () => console.log(`LISTENING ${server.address().port}`));
} else {
  server = createServer((req, res) => control(req, res, () => serve(req, res)));
  server.listen(env.port, env.host, () => console.log(`LISTENING ${server.address().port}`));
}
exitOnSigterm();
