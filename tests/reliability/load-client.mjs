// Holds many idle standalone GET streams open against an MCP endpoint, in its own process so that
// the server's process keeps its file descriptors for the server side. Spawned by load.test.ts
// through bash with `ulimit -n` raised as far as the hard limit allows.
//
//   node load-client.mjs <url> <streams> <keepAlivesPerStream>
//
// Prints JSON lines: {"opened":n,"ms":...} once every stream is primed, then
// {"keepAlives":{"min":..,"max":..},"ms":...} once every stream has received the asked number of
// keep-alive comments; then holds the streams until stdin closes, and exits. {"progress":n} lines
// come every 1,000 streams.
import { Agent, request } from 'node:http';
import { connect } from 'node:net';

const [url, countArg, wantArg] = process.argv.slice(2);
const target = new URL(url);
const total = Number(countArg);
const want = Number(wantArg);
const PROTOCOL = '2025-11-25';
const agent = new Agent({ keepAlive: true, maxSockets: 64 });
const started = Date.now();

function post(body, headers = {}, attempt = 1) {
  return new Promise((resolve, reject) => {
    const req = request(
      target,
      {
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': PROTOCOL,
          ...headers,
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, text }));
      },
    );
    req.on('error', (error) => {
      // A pooled socket the server closed as idle just as we reused it: the request never arrived.
      if (req.reusedSocket && error.code === 'ECONNRESET' && attempt < 3) resolve(post(body, headers, attempt + 1));
      else reject(error);
    });
    req.end(JSON.stringify(body));
  });
}

async function openSession() {
  const init = await post({
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: 'load', version: '1' } },
  });
  const sessionId = init.headers['mcp-session-id'];
  if (init.status !== 200 || !sessionId) throw new Error(`initialize: ${init.status} ${init.text.slice(0, 200)}`);
  const ack = await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, { 'mcp-session-id': sessionId });
  if (ack.status !== 202) throw new Error(`initialized: ${ack.status}`);
  return sessionId;
}

/** One raw socket per stream: the cheapest client there is, so the numbers are the server's. */
function openStream(sessionId) {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(target.port), target.hostname);
    const stream = { socket, keepAlives: 0, primed: false, buffer: '' };
    socket.setEncoding('utf8');
    socket.on('connect', () => {
      socket.write(
        `GET ${target.pathname} HTTP/1.1\r\nHost: ${target.host}\r\nAccept: text/event-stream\r\n` +
          `Mcp-Session-Id: ${sessionId}\r\nMcp-Protocol-Version: ${PROTOCOL}\r\n\r\n`,
      );
    });
    socket.on('data', (chunk) => {
      stream.buffer += chunk;
      if (!stream.primed) {
        if (!/^HTTP\/1\.1 200/.test(stream.buffer) && stream.buffer.includes('\r\n'))
          return reject(new Error(`GET: ${stream.buffer.slice(0, 200)}`));
        if (stream.buffer.includes('data: \n\n')) {
          stream.primed = true;
          stream.buffer = '';
          resolve(stream);
        }
        return;
      }
      let at;
      while ((at = stream.buffer.indexOf(': keep-alive\n\n')) !== -1) {
        stream.keepAlives++;
        stream.buffer = stream.buffer.slice(at + 14);
      }
      if (stream.buffer.length > 4096) stream.buffer = stream.buffer.slice(-64);
    });
    socket.on('error', (e) => (stream.primed ? console.error(`stream error: ${e.message}`) : reject(e)));
    socket.on('close', () => {
      stream.closed = true;
    });
  });
}

const streams = [];
// The parent ends stdin to stop us, at any point.
process.stdin.resume();
process.stdin.on('end', () => {
  for (const s of streams) s.socket.destroy();
  process.exit(0);
});

let next = 0;
async function worker() {
  while (next < total) {
    next++;
    streams.push(await openStream(await openSession()));
    if (streams.length % 1000 === 0) console.log(JSON.stringify({ progress: streams.length, ms: Date.now() - started }));
  }
}
await Promise.all(Array.from({ length: 32 }, worker));
agent.destroy();
console.log(JSON.stringify({ opened: streams.length, ms: Date.now() - started }));

// Keep-alives are counted from here on: every stream must get `want` of them.
for (const s of streams) s.keepAlives = 0;
const waitStart = Date.now();
await new Promise((resolve) => {
  const check = setInterval(() => {
    const closed = streams.filter((s) => s.closed).length;
    if (closed > 0) {
      console.log(JSON.stringify({ error: `${closed} streams closed by the server` }));
      clearInterval(check);
      resolve();
      return;
    }
    const min = Math.min(...streams.map((s) => s.keepAlives));
    if (min >= want) {
      clearInterval(check);
      const max = Math.max(...streams.map((s) => s.keepAlives));
      console.log(JSON.stringify({ keepAlives: { min, max }, ms: Date.now() - waitStart }));
      resolve();
    }
  }, 100);
});
