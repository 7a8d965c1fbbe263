// The physical limit: node:http writing the same SSE frames (priming event, `id:` per event, one
// JSON.stringify per message) with no MCP logic: no schema validation, no McpServer, no rules. It
// knows just enough of the benchmark's calls to answer them, and keeps every frame of a stream in
// an array so the resume and polling workloads have something to replay.
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { FILL_EVENTS_PER_STREAM, FILL_MESSAGE, handleControl, trackResume } from './control.mjs';
import { BURST_PAYLOAD, BURST_YIELD_EVERY, benchEnv } from './tools.mjs';

const env = benchEnv();
const SSE_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache, no-transform', 'x-accel-buffering': 'no' };
const PROTOCOL_VERSION = '2025-11-25';

/** streamId → { frames: string[] (frames[i] has seq i + 1), res, complete } */
const streams = new Map();
const sessions = new Set();

const id = () => randomBytes(16).toString('base64url');
const yieldToLoop = () => new Promise((resolve) => setImmediate(resolve));

function openStream(res, sessionId) {
  const stream = { id: id(), frames: [], res, complete: false };
  streams.set(stream.id, stream);
  res.writeHead(200, { ...SSE_HEADERS, 'mcp-session-id': sessionId });
  res.flushHeaders();
  res.socket?.setNoDelay(true);
  res.write(`id: ${stream.id}.0\nretry: ${env.retryMs}\ndata: \n\n`);
  res.once('close', () => {
    if (stream.res === res) stream.res = undefined;
  });
  return stream;
}

function emit(stream, message, final = false) {
  const frame = `id: ${stream.id}.${stream.frames.length + 1}\ndata: ${JSON.stringify(message)}\n\n`;
  stream.frames.push(frame);
  stream.res?.write(frame);
  if (final) {
    stream.complete = true;
    stream.res?.end();
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
      emit(stream, { method: 'notifications/message', params: { level: 'info', logger: 'bench', data: `${BURST_PAYLOAD}${i % 10_000}` }, jsonrpc: '2.0' });
      if (i % BURST_YIELD_EVERY === 0) await yieldToLoop();
    }
    return text(`burst ${args.count}`);
  }
  if (name === 'long_task') {
    const { steps, intervalMs, closeEvery, retryMs } = args;
    for (let step = 1; step <= steps; step++) {
      emit(stream, { method: 'notifications/message', params: { level: 'info', logger: 'long_task', data: { step } }, jsonrpc: '2.0' });
      if (step === steps) break;
      if (closeEvery !== undefined && step % closeEvery === 0 && stream.res) {
        const res = stream.res;
        stream.res = undefined;
        res.end(`retry: ${retryMs ?? env.retryMs}\n\n`);
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
  let sessionId = req.headers['mcp-session-id'];
  let value;
  if (message.method === 'initialize') {
    sessionId = id();
    sessions.add(sessionId);
    value = INIT_RESULT;
  }
  if (env.json) {
    if (message.method === 'tools/call') value = await runTool({ id: '', frames: [], res: undefined }, message);
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
  res.socket?.setNoDelay(true);
  res.write(`id: ${lastEventId}\nretry: ${env.retryMs}\ndata: \n\n`);
  for (let i = Number(lastEventId.slice(dot + 1)); i < stream.frames.length; i++) res.write(stream.frames[i]);
  if (stream.complete) {
    res.end();
    return;
  }
  stream.res?.end();
  stream.res = res;
  res.once('close', () => {
    if (stream.res === res) stream.res = undefined;
  });
}

function fill(events) {
  let left = events;
  while (left > 0) {
    const stream = { id: id(), frames: [], res: undefined, complete: false };
    streams.set(stream.id, stream);
    const n = Math.min(FILL_EVENTS_PER_STREAM, left);
    for (let seq = 1; seq <= n; seq++) {
      stream.frames.push(`id: ${stream.id}.${seq}\ndata: ${JSON.stringify({ ...FILL_MESSAGE, params: { ...FILL_MESSAGE.params, seq } })}\n\n`);
    }
    left -= n;
  }
  return { streams: streams.size };
}

const server = createServer((req, res) => {
  if (handleControl(req, res, { fill })) return;
  trackResume(req, res);
  const fail = (error) => {
    if (!res.headersSent) res.writeHead(500);
    res.end(String(error));
  };
  if (req.method === 'POST') post(req, res).catch(fail);
  else if (req.method === 'GET') get(req, res);
  else if (req.method === 'DELETE') res.writeHead(200).end();
  else res.writeHead(405).end();
});
server.listen(env.port, env.host, () => console.log(`LISTENING ${server.address().port}`));
