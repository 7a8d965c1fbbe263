// The load generator's side of Streamable HTTP: raw requests over undici keep-alive pools and a
// small incremental SSE parser. No SDK client here, so the client is not what gets measured.
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';

export const PROTOCOL_VERSION = '2025-11-25';
const POST_HEADERS = {
  accept: 'application/json, text/event-stream',
  'content-type': 'application/json',
  'mcp-protocol-version': PROTOCOL_VERSION,
};

/** A 2026-07-28 client: no session; the envelope in every request's `_meta`, routing in headers. */
export const MODERN_PROTOCOL_VERSION = '2026-07-28';
const MODERN_ENVELOPE = {
  'io.modelcontextprotocol/protocolVersion': MODERN_PROTOCOL_VERSION,
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'mcp-kit-bench', version: '0.0.0' },
};

/** One SSE event block, parsed. */
export function parseEvent(block) {
  let id;
  let data;
  let retry;
  for (const line of block.split('\n')) {
    const colon = line.indexOf(':');
    if (colon === 0) continue;
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'id') id = value;
    else if (field === 'data') data = data === undefined ? value : `${data}\n${value}`;
    else if (field === 'retry') retry = Number(value);
  }
  return { id, data, retry };
}

/** Splits a byte stream into event blocks (comments and bare `retry:` blocks included). */
export class SseSplitter {
  constructor(onBlock) {
    this.onBlock = onBlock;
    this.decoder = new TextDecoder();
    this.buffer = '';
  }

  push(chunk) {
    this.buffer += this.decoder.decode(chunk, { stream: true });
    let start = 0;
    for (;;) {
      const end = this.buffer.indexOf('\n\n', start);
      if (end < 0) break;
      const block = this.buffer.slice(start, end);
      start = end + 2;
      if (this.onBlock(block) === false) return false;
    }
    this.buffer = start === 0 ? this.buffer : this.buffer.slice(start);
    return true;
  }
}

/** A block that carries a JSON-RPC response (not a notification, request, priming event or comment). */
export function isResponseBlock(block) {
  return block.includes('"jsonrpc"') && !block.includes('"method"');
}

export class McpHttp {
  /**
   * @param {string} origin `http://127.0.0.1:port`; the endpoint is `${origin}${path}`.
   * @param {{ connections?: number, path?: string, headers?: Record<string, string> }} options `headers` go on every POST (a bearer token).
   */
  constructor(origin, { connections = 64, path = '/mcp', headers = {} } = {}) {
    this.origin = origin;
    this.postHeaders = { ...POST_HEADERS, ...headers };
    this.pool = new Pool(origin, { connections, pipelining: 1, keepAliveTimeout: 60_000, headersTimeout: 0, bodyTimeout: 0 });
    this.path = path;
    this.nextModernId = 1;
    /** tool name → the headers of a 2026 tools/call of it. */
    this.modernHeaders = new Map();
  }

  close() {
    return this.pool.destroy();
  }

  /** Initializes a session and sends notifications/initialized. */
  async initialize() {
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'mcp-kit-bench', version: '0.0.0' } },
    });
    const r = await this.post(undefined, body);
    if (r.status !== 200 || !r.sessionId) throw new Error(`initialize failed: ${r.status} ${r.text.slice(0, 300)}`);
    const session = { id: r.sessionId, nextId: 1 };
    const n = await this.post(session, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
    if (n.status !== 202) throw new Error(`notifications/initialized failed: ${n.status} ${n.text.slice(0, 300)}`);
    return session;
  }

  /** tools/call; resolves once the response has been received and the response body has ended. */
  callTool(session, name, args = {}, onBlock) {
    const body = JSON.stringify({ jsonrpc: '2.0', id: session.nextId++, method: 'tools/call', params: { name, arguments: args } });
    return this.post(session, body, onBlock);
  }

  /** tools/call as a 2026-07-28 client sends it: `_meta` envelope, `Mcp-Method` and `Mcp-Name`. */
  callToolModern(name, args = {}) {
    let headers = this.modernHeaders.get(name);
    if (headers === undefined) {
      headers = { ...this.postHeaders, 'mcp-protocol-version': MODERN_PROTOCOL_VERSION, 'mcp-method': 'tools/call', 'mcp-name': name };
      this.modernHeaders.set(name, headers);
    }
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id: this.nextModernId++,
      method: 'tools/call',
      params: { name, arguments: args, _meta: MODERN_ENVELOPE },
    });
    return this.send(headers, body);
  }

  /**
   * One request through undici's dispatch API (callbacks, no body stream objects: the load
   * generator should cost as little per request as it can). `onData(chunk)` returning false hangs
   * up. Resolves with the status and headers once the response ended, failed or was aborted.
   */
  exchange(path, method, headers, body, onData, onStart) {
    return new Promise((resolve) => {
      const out = { status: 0, headers: undefined, error: undefined, aborted: false };
      this.pool.dispatch(
        { path, method, headers, body },
        {
          onRequestStart() {},
          onResponseStart(c, statusCode, responseHeaders) {
            out.status = statusCode;
            out.headers = responseHeaders;
            onStart?.(out, () => {
              out.aborted = true;
              c.abort(new Error('hung up by the load generator'));
            });
          },
          onResponseData(c, chunk) {
            if (onData(chunk) === false) {
              out.aborted = true;
              c.abort(new Error('hung up by the load generator'));
            }
          },
          onResponseEnd() {
            resolve(out);
          },
          onResponseError(c, error) {
            if (!out.aborted) out.error = error;
            resolve(out);
          },
        },
      );
    });
  }

  /**
   * POSTs `body`; reads an SSE or JSON answer to its end. `onBlock(block)` sees each SSE event
   * block as it arrives. Resolves with status, session id, bytes, event count, the response text.
   */
  post(session, body, onBlock) {
    return this.send(session ? { ...this.postHeaders, 'mcp-session-id': session.id } : this.postHeaders, body, onBlock);
  }

  /** POSTs `body` with `headers`; see {@link post}. */
  async send(headers, body, onBlock) {
    const out = {
      status: 0,
      sessionId: undefined,
      bytes: 0,
      events: 0,
      text: '',
      firstEventId: undefined,
      started: performance.now(),
      ended: 0,
    };
    let splitter;
    const chunks = [];
    const r = await this.exchange(
      this.path,
      'POST',
      headers,
      body,
      (chunk) => {
        out.bytes += chunk.length;
        if (splitter) splitter.push(chunk);
        else chunks.push(chunk);
      },
      (res) => {
        out.status = res.status;
        out.sessionId = res.headers['mcp-session-id'];
        if (String(res.headers['content-type'] ?? '').startsWith('text/event-stream')) {
          splitter = new SseSplitter((block) => {
            if (block.startsWith(':')) return true;
            out.events++;
            if (out.firstEventId === undefined) out.firstEventId = parseEvent(block).id;
            if (isResponseBlock(block)) out.text = block;
            onBlock?.(block);
            return true;
          });
        }
      },
    );
    if (r.error) throw r.error;
    if (!splitter) out.text = chunks.length === 1 ? chunks[0].toString('utf8') : Buffer.concat(chunks).toString('utf8');
    out.ended = performance.now();
    return out;
  }

  /**
   * Opens a GET stream (standalone, or a resume with `lastEventId`). Reads until the stream ends,
   * `stopAfterEvents` message events arrived, or (with `quietMs`) no event came for that long after
   * the first one; then hangs up. `ended` is when the last event arrived. `onOpen(out, hangUp)`
   * fires once the response headers are in.
   */
  async get(session, { lastEventId, stopAfterEvents = Infinity, quietMs, onOpen, onEvent } = {}) {
    const headers = { accept: 'text/event-stream', 'mcp-session-id': session.id, 'mcp-protocol-version': PROTOCOL_VERSION };
    if (lastEventId) headers['last-event-id'] = lastEventId;
    const out = { status: 0, bytes: 0, events: 0, blocks: [], started: performance.now(), ended: 0, primed: false };
    let hangUp;
    let quiet;
    let lastEventAt = 0;
    let stop = false;
    const splitter = new SseSplitter((block) => {
      if (block.startsWith(':')) return true;
      const event = parseEvent(block);
      if (event.data === '' || event.data === undefined) {
        out.primed = true;
        onEvent?.(event, out);
        return true;
      }
      out.events++;
      out.blocks.push(block);
      lastEventAt = performance.now();
      onEvent?.(event, out);
      if (out.events >= stopAfterEvents) {
        stop = true;
        return false;
      }
      if (quietMs !== undefined) {
        clearTimeout(quiet);
        quiet = setTimeout(() => {
          out.quiet = true;
          hangUp();
        }, quietMs);
      }
      return true;
    });
    const r = await this.exchange(
      this.path,
      'GET',
      headers,
      undefined,
      (chunk) => {
        out.bytes += chunk.length;
        splitter.push(chunk);
        return !stop;
      },
      (res, abort) => {
        out.status = res.status;
        hangUp = abort;
        onOpen?.(out, abort);
      },
    );
    clearTimeout(quiet);
    if (r.error) out.error = r.error;
    out.ended = stop || out.quiet ? lastEventAt : performance.now();
    return out;
  }

  async control(path, method = 'GET') {
    const chunks = [];
    const r = await this.exchange(path, method, {}, undefined, (chunk) => {
      chunks.push(chunk);
    });
    const text = Buffer.concat(chunks).toString('utf8');
    if (r.error) throw r.error;
    if (r.status !== 200) throw new Error(`${path}: ${r.status} ${text}`);
    return JSON.parse(text);
  }
}
