/** HttpForwarder against a plain node:http upstream: what reaches the owner, and what comes back. */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { FORWARDED_HEADER, MOVED_HEADER, type CoreResponder, type OutHeaders, type SseSink } from '@mcp-kit/core';
import { HttpForwarder } from '@mcp-kit/redis';

let upstream: Server | undefined;
const forwarders: HttpForwarder[] = [];
afterEach(async () => {
  for (const f of forwarders.splice(0)) f.close();
  upstream?.closeAllConnections();
  await new Promise<void>((resolve) => (upstream ? upstream.close(() => resolve()) : resolve()));
  upstream = undefined;
});

async function owner(handler: (req: IncomingMessage, body: string, res: ServerResponse) => void): Promise<string> {
  upstream = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (c: string) => (body += c));
    req.on('end', () => handler(req, body, res));
  });
  await new Promise<void>((resolve) => upstream!.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(upstream!.address() as AddressInfo).port}/mcp`;
}

/** A responder that records what the forwarder relays. */
function recorder() {
  const rec = {
    sent: undefined as undefined | { status: number; headers: OutHeaders; body: string | undefined },
    streamed: undefined as undefined | { headers: OutHeaders; chunks: string[]; ended: boolean },
    closeListeners: [] as Array<() => void>,
  };
  const responder: CoreResponder = {
    send(status, headers, body) {
      rec.sent = { status, headers, body };
    },
    stream(headers): SseSink {
      const s = { headers, chunks: [] as string[], ended: false };
      rec.streamed = s;
      return {
        write(chunk) {
          s.chunks.push(chunk);
          return true;
        },
        end() {
          s.ended = true;
        },
        bufferedBytes: 0,
        onClose(listener) {
          rec.closeListeners.push(listener);
        },
      };
    },
  };
  return { rec, responder };
}

async function eventually(check: () => void, timeoutMs = 3_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return check();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((r) => setTimeout(r, 5));
    }
  }
}

function forwarder(options: { responseTimeoutMs?: number } = {}): HttpForwarder {
  const f = new HttpForwarder({ instanceId: 'inst-b', connectTimeoutMs: 500, ...options });
  forwarders.push(f);
  return f;
}

describe('HttpForwarder', () => {
  it("relays the request (body, the client's headers and query, minus hop-by-hop) and the JSON answer", async () => {
    let seen: { method?: string; url?: string; headers?: IncomingMessage['headers']; body?: string } = {};
    const url = await owner((req, body, res) => {
      seen = { method: req.method, url: req.url, headers: req.headers, body };
      res.writeHead(202, { 'x-served-by': 'a', connection: 'keep-alive', 'mcp-session-id': 's1' }).end();
    });
    const { rec, responder } = recorder();
    const body = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized', params: { note: 'héllo' } });
    await forwarder().forward(
      url,
      {
        method: 'POST',
        headers: {
          host: 'public.example:443',
          'mcp-session-id': 's1',
          authorization: 'Bearer t',
          connection: 'close',
          'transfer-encoding': 'chunked',
          'accept-encoding': 'gzip',
          'content-length': '1',
        },
        body,
        url: new URL('https://public.example/mcp?key=k1'),
      },
      responder,
    );
    expect(seen.method).toBe('POST');
    expect(seen.url).toBe('/mcp?key=k1');
    expect(seen.body).toBe(body);
    expect(seen.headers).toMatchObject({
      host: 'public.example:443',
      'mcp-session-id': 's1',
      authorization: 'Bearer t',
      [FORWARDED_HEADER]: 'inst-b',
      'accept-encoding': 'identity',
      'content-length': String(Buffer.byteLength(body)),
    });
    expect(seen.headers?.['transfer-encoding']).toBeUndefined();
    expect(rec.sent?.status).toBe(202);
    expect(rec.sent?.body).toBeUndefined();
    expect(rec.sent?.headers).toMatchObject({ 'x-served-by': 'a', 'mcp-session-id': 's1' });
    expect(rec.sent?.headers.connection).toBeUndefined();
  });

  it("an owner's answer marked mcp-kit-moved (it let the session go while draining) is not relayed: forward rejects", async () => {
    const url = await owner((_req, _body, res) => {
      res.writeHead(503, { [MOVED_HEADER]: 'inst-a', 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","error":{}}');
    });
    const { rec, responder } = recorder();
    await expect(forwarder().forward(url, { method: 'POST', headers: {}, body: '{}' }, responder)).rejects.toThrow(
      /instance inst-a let the session go/,
    );
    expect(rec.sent).toBeUndefined();
    expect(rec.streamed).toBeUndefined();
  });

  it('relays an SSE answer chunk by chunk as it comes, and ends when the owner ends it', async () => {
    let finish: (() => void) | undefined;
    const url = await owner((_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('id: x.0\ndata: \n\n');
      finish = () => res.end('id: x.1\ndata: {"result":{}}\n\n');
    });
    const { rec, responder } = recorder();
    await forwarder().forward(url, { method: 'GET', headers: {}, body: undefined }, responder);
    await eventually(() => expect(rec.streamed?.chunks.join('')).toBe('id: x.0\ndata: \n\n'));
    expect(rec.streamed?.ended).toBe(false);
    finish!();
    await eventually(() => expect(rec.streamed?.ended).toBe(true));
    expect(rec.streamed?.chunks.join('')).toBe('id: x.0\ndata: \n\nid: x.1\ndata: {"result":{}}\n\n');
  });

  it('hangs up on the owner when the client leaves a relayed stream', async () => {
    let ownerSawClose = false;
    const url = await owner((_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(': open\n\n');
      res.on('close', () => (ownerSawClose = true));
    });
    const { rec, responder } = recorder();
    await forwarder().forward(url, { method: 'GET', headers: {}, body: undefined }, responder);
    await eventually(() => expect(rec.streamed?.chunks.length).toBe(1));
    for (const l of rec.closeListeners) l();
    await eventually(() => expect(ownerSawClose).toBe(true));
  });

  it('rejects when the owner cannot be reached, before anything was sent (the engine answers 502)', async () => {
    const url = await owner(() => {});
    upstream!.close();
    const { rec, responder } = recorder();
    const error = await forwarder()
      .forward(url, { method: 'POST', headers: {}, body: '{}' }, responder)
      .then(
        () => undefined,
        (e: unknown) => e as { maybeReceived?: boolean },
      );
    expect(error).toBeInstanceOf(Error);
    // Nothing reached the owner: the engine may serve the request elsewhere.
    expect(error?.maybeReceived).toBeUndefined();
    expect(rec.sent).toBeUndefined();
    expect(rec.streamed).toBeUndefined();
  });

  it('a reused keep-alive connection the owner closed as the request crossed it (its idle timeout) is retried once on a new connection', async () => {
    const sockets: unknown[] = [];
    const url = await owner((req, _body, res) => {
      sockets.push(req.socket);
      // The second request on the first connection: the owner's idle timer closed it as the bytes came.
      if (sockets.length === 2) return void req.socket.destroy();
      res.writeHead(200, { 'content-type': 'application/json' }).end(`{"n":${sockets.length}}`);
    });
    const f = forwarder();
    await f.forward(url, { method: 'POST', headers: {}, body: '{}' }, recorder().responder);
    const { rec, responder } = recorder();
    await f.forward(url, { method: 'POST', headers: {}, body: '{}' }, responder);
    // Not "socket hang up", for which the draining instance that handed the request over would answer 503.
    expect(rec.sent?.status).toBe(200);
    expect(rec.sent?.body).toBe('{"n":3}');
    expect(sockets[1]).toBe(sockets[0]);
    expect(sockets[2]).not.toBe(sockets[0]);
  });

  it('a new connection that breaks before the answer is not retried: the forward rejects', async () => {
    let received = 0;
    const url = await owner((req) => {
      received++;
      req.socket.destroy();
    });
    const error = await forwarder()
      .forward(url, { method: 'POST', headers: {}, body: '{}' }, recorder().responder)
      .then(
        () => undefined,
        (e: unknown) => e as Error,
      );
    expect(error?.message).toMatch(/socket hang up/);
    expect(received).toBe(1);
  });

  it('a broken connection after the request went out says whether the owner took it, once the owner is known to acknowledge (102 Processing)', async () => {
    // Each request: 'ack' acknowledges then breaks, 'answer' acknowledges then answers, 'break' breaks unread.
    const plan = ['break', 'answer', 'ack', 'break'];
    const url = await owner((req, _body, res) => {
      const step = plan.shift();
      if (step !== 'break') res.writeProcessing();
      if (step === 'answer') return res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      setImmediate(() => req.socket.destroy());
    });
    const f = forwarder();
    const outcome = () =>
      f.forward(url, { method: 'POST', headers: {}, body: '{}' }, recorder().responder).then(
        () => 'answered' as const,
        (e: { requestSent?: boolean; received?: boolean }) => ({ requestSent: e.requestSent, received: e.received }),
      );
    // Not known to acknowledge yet (a fetch runtime never is): no verdict, the engine decides.
    expect(await outcome()).toEqual({ requestSent: true, received: undefined });
    expect(await outcome()).toBe('answered');
    expect(await outcome()).toEqual({ requestSent: true, received: true });
    // Known to acknowledge, silent this time: it never took the request.
    expect(await outcome()).toEqual({ requestSent: true, received: false });
  });

  it('an owner that stops answering (frozen) fails the forward within 2 × responseTimeoutMs on the keep-alive socket it answered on before, marked maybeReceived', async () => {
    let frozen = false;
    const seen: Array<{ method: string | undefined; socket: unknown }> = [];
    const url = await owner((req, _body, res) => {
      seen.push({ method: req.method, socket: req.socket });
      if (frozen) return; // the bytes arrive, nothing answers: a stopped process's kernel takes them
      res.writeHead(202).end();
    });
    const f = forwarder({ responseTimeoutMs: 150 });
    await f.forward(url, { method: 'POST', headers: {}, body: '{}' }, recorder().responder);
    frozen = true;
    const started = Date.now();
    const { rec, responder } = recorder();
    const error = await f.forward(url, { method: 'POST', headers: {}, body: '{"id":2}' }, responder).then(
      () => undefined,
      (e: unknown) => e as Error & { maybeReceived?: boolean },
    );
    const took = Date.now() - started;
    expect(error?.message).toMatch(/sent no answer within 150 ms, nor to a check on a new connection/);
    expect(error?.maybeReceived).toBe(true);
    expect(took).toBeGreaterThanOrEqual(290);
    expect(took).toBeLessThan(1_500);
    // The request reached the owner on the reused socket (before, nothing bounded that wait); the check came on a new one.
    expect(seen.map((r) => r.method)).toEqual(['POST', 'POST', 'OPTIONS']);
    expect(seen[1]!.socket).toBe(seen[0]!.socket);
    expect(seen[2]!.socket).not.toBe(seen[0]!.socket);
    expect(rec.sent).toBeUndefined();
  });

  it('an owner slow to answer (a jsonResponse call) that answers the check on a new connection is waited for', async () => {
    let checks = 0;
    const url = await owner((req, _body, res) => {
      if (req.method === 'OPTIONS') {
        checks++;
        return void res.writeHead(405).end();
      }
      setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":1,"result":{}}'), 700);
    });
    const { rec, responder } = recorder();
    await forwarder({ responseTimeoutMs: 150 }).forward(url, { method: 'POST', headers: {}, body: '{"id":1}' }, responder);
    expect(rec.sent?.status).toBe(200);
    expect(rec.sent?.body).toBe('{"jsonrpc":"2.0","id":1,"result":{}}');
    expect(checks).toBeGreaterThanOrEqual(2);
  });
});
