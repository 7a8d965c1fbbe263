import {
  Agent as HttpAgent,
  request as httpRequest,
  type ClientRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type OutgoingHttpHeaders,
} from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import {
  FORWARDED_HEADER,
  HANDED_OVER_HEADER,
  MOVED_HEADER,
  type CoreResponder,
  type ForwardedRequest,
  type OutHeaders,
} from '@mcp-kit/core';

/** Headers that describe one hop, not the message; never relayed. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'content-length',
  'accept-encoding',
  'content-encoding',
]);

export interface ForwarderOptions {
  /** Sent in {@link FORWARDED_HEADER}, so the owner never forwards the request again. */
  instanceId: string;
  /** The header's value for a request (signed, so a client cannot forge it); default the bare `instanceId`. */
  sign?: (request: { method: string; sessionId: string | undefined }) => string;
  /** Connecting to the owner may take this long. Default `2_000`. */
  connectTimeoutMs?: number;
  /**
   * An owner that sends no response head this long after the request went out (on a new or a
   * reused keep-alive connection) is asked for any answer on a new connection (an `OPTIONS`
   * request); if none comes within this long either, it counts as unreachable (frozen, or cut off
   * by a silent partition): the forward fails, with `maybeReceived` (the owner may hold the
   * request). An owner that answers the check is busy, not gone (a `jsonResponse` call answers
   * when its tool is done), and is waited for, checked again every this long. Default `3_000`:
   * a frozen owner is given up after at most 2 × this.
   */
  responseTimeoutMs?: number;
  /**
   * A relayed stream whose client reads slower than the owner writes is cut past this many
   * buffered bytes; the client resumes from the store, as with a local stream. Default 4 MiB.
   */
  maxBufferedBytes?: number;
}

/**
 * Relays requests to the instance that owns their session over HTTP(S), with keep-alive
 * connections: the body as read, the client's headers (so the owner runs its own auth, Origin and
 * Host checks), and the answer, a JSON body or an SSE stream, back through the responder as it comes.
 */
export class HttpForwarder {
  private readonly http = new HttpAgent({ keepAlive: true });
  private readonly https = new HttpsAgent({ keepAlive: true });
  private readonly connectTimeoutMs: number;
  private readonly responseTimeoutMs: number;
  private readonly maxBufferedBytes: number;
  /** The checks under way, per owner origin: concurrent forwards to one silent owner share one. */
  private readonly probes = new Map<string, Promise<boolean>>();
  /**
   * Owner origins heard acknowledging a forwarded request (`102 Processing`, sent before anything
   * of it runs): from such an owner, no acknowledgement before the connection broke means the
   * request ran nowhere. An owner that cannot send one (a fetch runtime) is never in here.
   */
  private readonly acknowledging = new Set<string>();

  constructor(private readonly options: ForwarderOptions) {
    this.connectTimeoutMs = options.connectTimeoutMs ?? 2_000;
    this.responseTimeoutMs = options.responseTimeoutMs ?? 3_000;
    this.maxBufferedBytes = options.maxBufferedBytes ?? 4 * 1024 * 1024;
  }

  forward(url: string, request: ForwardedRequest, responder: CoreResponder): Promise<void> {
    return new Promise((resolve, reject) => {
      const target = new URL(url);
      // The owner's endpoint, with the client's query string (some clients put credentials there).
      if (request.url?.search) target.search = request.url.search;
      const headers = this.headersFor(request);
      const secure = target.protocol === 'https:';
      let settled = false;
      // A try whose request went out whole and whose connection then broke before any answer.
      let brokeAfterSending = false;
      // `pooled`: on a keep-alive connection from the agent; a retry goes on a new one of its own.
      const send = (pooled: boolean): void => {
        let head = false;
        let written = false;
        let acknowledged = false;
        const req = (secure ? httpsRequest : httpRequest)(
          target,
          { method: request.method, headers, agent: pooled ? (secure ? this.https : this.http) : false },
          (upstream) => {
            head = true;
            answered();
            this.relay(upstream, responder, {
              settle: () => (settled = true),
              settled: () => settled,
              resolve,
              reject,
            });
          },
        );
        const answered = this.bound(req, target);
        req.on('finish', () => (written = true));
        req.on('information', (info) => {
          if (info.statusCode !== 102) return;
          acknowledged = true;
          this.acknowledging.add(target.origin);
        });
        req.on('error', (error) => {
          if (settled) return;
          if (!head && written && brokenConnection(error)) brokeAfterSending = true;
          // A keep-alive connection that breaks before any answer is most likely one the owner closed
          // as this request crossed it (its idle timeout ran out first: under load, the agent's
          // earlier timer runs late), so the owner never read it: it goes again, once, on a new
          // connection. An owner that did read it has its id in flight in the session and refuses
          // the copy (400), so its tool does not run twice there. A new connection that breaks fails,
          // as does one whose owner said it took the request.
          if (pooled && req.reusedSocket && !head && !acknowledged && brokenConnection(error)) return send(false);
          settled = true;
          // The owner may have read the request before its connection broke (it died while it ran
          // the request, or closed the connection unread as it stopped): the engine decides, told
          // whether the owner took it when the owner is one that says so.
          if (!(brokeAfterSending && !head)) return reject(error);
          const received = acknowledged ? true : this.acknowledging.has(target.origin) ? false : undefined;
          reject(Object.assign(error, { requestSent: true }, received === undefined ? {} : { received }));
        });
        req.end(request.body);
      };
      send(true);
    });
  }

  /**
   * Relays the owner's answer through `responder`: an SSE stream chunk by chunk as it comes (the
   * forward is done once it starts), a JSON body once whole. An answer marked {@link MOVED_HEADER}
   * is not relayed: the forward fails.
   */
  private relay(
    upstream: IncomingMessage,
    responder: CoreResponder,
    outcome: { settle(): void; settled(): boolean; resolve(): void; reject(error: Error): void },
  ): void {
    // The owner let the session go while draining: not an answer for the client; the engine
    // restores the session here once the owner record stops naming that instance.
    if (upstream.headers[MOVED_HEADER] !== undefined) {
      outcome.settle();
      upstream.resume();
      return outcome.reject(new Error(`instance ${String(upstream.headers[MOVED_HEADER])} let the session go (draining)`));
    }
    const status = upstream.statusCode ?? 502;
    const out = relayable(upstream.headers);
    if (status === 200 && String(upstream.headers['content-type'] ?? '').startsWith('text/event-stream')) {
      const sink = responder.stream(out);
      outcome.settle();
      outcome.resolve();
      upstream.setEncoding('utf8');
      upstream.on('data', (chunk: string) => {
        sink.write(chunk);
        if (sink.bufferedBytes > this.maxBufferedBytes) upstream.destroy();
      });
      // The owner went away or hung up (its own close, a shutdown): end here too; the client resumes.
      upstream.on('error', () => {});
      upstream.on('close', () => sink.end());
      // The client left: hang up on the owner too, so its stream sees the disconnect.
      sink.onClose(() => upstream.destroy());
      return;
    }
    const chunks: Buffer[] = [];
    upstream.on('data', (chunk: Buffer) => chunks.push(chunk));
    upstream.on('end', () => {
      outcome.settle();
      const body = Buffer.concat(chunks).toString('utf8');
      responder.send(status, out, body === '' ? undefined : body);
      outcome.resolve();
    });
    upstream.on('error', (error) => {
      if (!outcome.settled()) outcome.reject(error);
    });
  }

  /** The client's headers for the owner, without hop-by-hop ones, with the hop header and the body's length. */
  private headersFor(request: ForwardedRequest): OutgoingHttpHeaders {
    const headers: OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(request.headers))
      if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value as string | string[];
    // Frames are relayed as text; a compressed body would have to be decoded first.
    headers['accept-encoding'] = 'identity';
    // A hand-over (a draining instance moving a client's request) is served as the client's own.
    const hop = { method: request.method.toUpperCase(), sessionId: sessionIdOf(request.headers['mcp-session-id']) };
    headers[request.handOver ? HANDED_OVER_HEADER : FORWARDED_HEADER] = this.options.sign?.(hop) ?? this.options.instanceId;
    if (request.body !== undefined) headers['content-length'] = String(Buffer.byteLength(request.body));
    return headers;
  }

  /**
   * Bounds how long `req` waits for the owner: `connectTimeoutMs` to connect, then (connected, or
   * at once on a reused keep-alive socket) `responseTimeoutMs` for the answer's head, else the
   * owner is checked (see {@link ForwarderOptions.responseTimeoutMs}); one that fails the check
   * ends the request with an error marked `maybeReceived`. Returns what to call once the head came.
   */
  private bound(req: ClientRequest, target: URL): () => void {
    let answered = false;
    let silence: ReturnType<typeof setTimeout> | undefined;
    const connecting = setTimeout(
      () => req.destroy(new Error(`could not connect to ${target.origin} within ${this.connectTimeoutMs} ms`)),
      this.connectTimeoutMs,
    );
    const awaitHead = (): void => {
      silence = setTimeout(() => {
        void this.answers(target).then((alive) => {
          if (answered || req.destroyed) return;
          if (alive) return awaitHead();
          const error = new Error(
            `instance at ${target.origin} sent no answer within ${this.responseTimeoutMs} ms, nor to a check on a new connection; it may have received the request`,
          );
          req.destroy(Object.assign(error, { maybeReceived: true }));
        });
      }, this.responseTimeoutMs);
    };
    req.on('socket', (socket) => {
      const connected = () => {
        clearTimeout(connecting);
        if (!answered) awaitHead();
      };
      if (!socket.connecting) connected();
      else socket.once('connect', connected);
    });
    const stop = () => {
      clearTimeout(connecting);
      clearTimeout(silence);
    };
    req.on('close', stop);
    req.on('error', stop);
    return () => {
      answered = true;
      clearTimeout(silence);
    };
  }

  /**
   * Whether the owner at `target` answers anything (any status: its process runs and the network
   * carries its bytes) on a new connection within `responseTimeoutMs`.
   */
  private answers(target: URL): Promise<boolean> {
    const key = target.origin;
    let probe = this.probes.get(key);
    if (probe) return probe;
    probe = new Promise<boolean>((resolve) => {
      const url = new URL(target.pathname, target);
      const check = (target.protocol === 'https:' ? httpsRequest : httpRequest)(url, { method: 'OPTIONS', agent: false }, (res) => {
        res.resume();
        resolve(true);
        check.destroy();
      });
      const timer = setTimeout(() => check.destroy(), this.responseTimeoutMs);
      check.on('error', () => resolve(false));
      check.on('close', () => {
        clearTimeout(timer);
        resolve(false);
      });
      check.end();
    }).finally(() => this.probes.delete(key));
    this.probes.set(key, probe);
    return probe;
  }

  close(): void {
    this.http.destroy();
    this.https.destroy();
  }
}

/** A connection reset or closed under a request (not a timeout of ours, not a refused connect). */
function brokenConnection(error: Error & { code?: string }): boolean {
  return error.code === 'ECONNRESET' || error.code === 'EPIPE';
}

function relayable(headers: IncomingHttpHeaders): OutHeaders {
  const out: OutHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || name === 'date') continue;
    out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

/** The session id a request names, as the receiving instance reads it. */
function sessionIdOf(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}
