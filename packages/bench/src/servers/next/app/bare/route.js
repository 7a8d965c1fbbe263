// The floor of a Next.js route: the same SSE frames as mcp-kit (priming event, `id:` per event,
// one JSON.stringify per message) through a ReadableStream, one chunk per turn of the event loop
// as mcp-kit's web bridge does, with no MCP logic. It answers just the calls of the throughput,
// burst and memory workloads, and the 2026-07-28 tools/call of the modern one (one JSON body).
import { randomBytes } from 'node:crypto';
import { BURST_PAYLOAD, BURST_YIELD_EVERY, benchEnv } from '../../../tools.mjs';

const env = benchEnv();
const SSE_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache, no-transform', 'x-accel-buffering': 'no' };
const INIT_RESULT = {
  protocolVersion: '2025-11-25',
  capabilities: { logging: {}, tools: { listChanged: true } },
  serverInfo: { name: 'bench-bare-next', version: '0.0.0' },
};
const MODERN_VERSION_KEY = 'io.modelcontextprotocol/protocolVersion';
const MODERN_RESULT_META = { 'io.modelcontextprotocol/serverInfo': { name: 'bench-bare-next', version: '0.0.0' } };
const encoder = new TextEncoder();
const text = (value) => ({ content: [{ type: 'text', text: value }] });
/** Every frame is kept, as bare node:http and mcp-kit keep theirs for replay. */
const streams = new Map();

export async function POST(request) {
  const message = await request.json();
  if (message.id === undefined) return new Response(null, { status: 202 });
  if (message.params?._meta?.[MODERN_VERSION_KEY] !== undefined) {
    const value = { ...text('This is a simple text response for testing.'), resultType: 'complete', _meta: MODERN_RESULT_META };
    return Response.json({ result: value, jsonrpc: '2.0', id: message.id });
  }
  const sessionId = message.method === 'initialize' ? randomBytes(16).toString('base64url') : request.headers.get('mcp-session-id');
  const respond = (value) => ({ result: value, jsonrpc: '2.0', id: message.id });
  if (env.json) {
    const value = message.method === 'initialize' ? INIT_RESULT : text('This is a simple text response for testing.');
    return Response.json(respond(value), { headers: { 'mcp-session-id': sessionId } });
  }
  const streamId = randomBytes(16).toString('base64url');
  let seq = 0;
  const frames = [];
  streams.set(streamId, frames);
  const body = new ReadableStream({
    async start(controller) {
      let pending = '';
      const send = () => {
        if (pending) controller.enqueue(encoder.encode(pending));
        pending = '';
      };
      const write = (frame) => {
        if (pending === '') setImmediate(send);
        pending += frame;
      };
      const emit = (msg) => {
        const frame = `id: ${streamId}.${++seq}\ndata: ${JSON.stringify(msg)}\n\n`;
        frames.push(frame);
        write(frame);
      };
      write(`id: ${streamId}.0\nretry: ${env.retryMs}\ndata: \n\n`);
      let value = INIT_RESULT;
      if (message.method === 'tools/call' && message.params.name === 'bench_burst') {
        const { count } = message.params.arguments;
        for (let i = 1; i <= count; i++) {
          emit({
            method: 'notifications/message',
            params: { level: 'info', logger: 'bench', data: `${BURST_PAYLOAD}${i % 10_000}` },
            jsonrpc: '2.0',
          });
          if (i % BURST_YIELD_EVERY === 0) await new Promise((resolve) => setImmediate(resolve));
        }
        value = text(`burst ${count}`);
      } else if (message.method === 'tools/call') {
        value = text('This is a simple text response for testing.');
      }
      emit(respond(value));
      send();
      controller.close();
    },
  });
  return new Response(body, { headers: { ...SSE_HEADERS, 'mcp-session-id': sessionId } });
}

/** An idle standalone stream: the priming event, then nothing until the client leaves. */
export async function GET(request) {
  const streamId = randomBytes(16).toString('base64url');
  const body = new ReadableStream({
    start(controller) {
      controller.enqueue(encoder.encode(`id: ${streamId}.0\nretry: ${env.retryMs}\ndata: \n\n`));
    },
  });
  return new Response(body, { headers: { ...SSE_HEADERS, 'mcp-session-id': request.headers.get('mcp-session-id') } });
}

export const runtime = 'nodejs';
export const dynamic = 'force-dynamic';
