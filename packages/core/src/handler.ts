import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { LATEST_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { eventId, parseEventId } from './events/ids.js';
import type { ReplayResult, StreamListener, StreamSubscription } from './events/store.js';
import { ErrorCode, errorBody, reject, type Rejection } from './http/errors.js';
import { allowsBatches, parseMessages, type ParsedBody } from './http/messages.js';
import type { CoreRequest, CoreResponder, OutHeaders } from './http/port.js';
import {
  checkAccept,
  checkContentType,
  checkHostAndOrigin,
  checkMethod,
  checkProtocolVersion,
  header,
  isLoopbackAddress,
} from './http/rules.js';
import { resolveOptions, type ConnectableServer, type McpHandlerOptions, type ResolvedOptions } from './options.js';
import { FORWARDED_HEADER, type SessionCluster, type SessionOwner } from './session/cluster.js';
import { SessionRegistry } from './session/registry.js';
import { asError, type Inbound, type Session } from './session/session.js';
import { SseConnection } from './streams/connection.js';
import { primingEvent } from './streams/frames.js';
import type { Stream } from './streams/stream.js';

/** Version assumed when a client sends no `MCP-Protocol-Version` (what the spec prescribes). */
const DEFAULT_NEGOTIATED_VERSION = '2025-03-26';
const FIRST_POLLING_VERSION = '2025-11-25';

const SSE_HEADERS: OutHeaders = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache, no-transform',
  // Stops nginx and similar proxies from buffering the stream.
  'x-accel-buffering': 'no',
};
const JSON_HEADERS: OutHeaders = { 'content-type': 'application/json' };

/** A session that another instance of the cluster owns. */
interface RemoteSession {
  remote: SessionOwner;
  id: string;
}

/** The framework-neutral MCP endpoint. Adapters turn framework requests into {@link CoreRequest}s. */
export interface McpHandler {
  /** Serves one HTTP request. Resolves once the response has started (streams go on after). */
  handle(request: CoreRequest, responder: CoreResponder): Promise<void>;
  /** Graceful shutdown: ends every stream with the retry hint, closes every session and the store. */
  close(): Promise<void>;
  /** Open sessions. */
  readonly sessionCount: number;
  /** Open sessions whose server is let go until their next POST (see `hibernateAfterMs`). */
  readonly hibernatedSessionCount: number;
  readonly options: Readonly<ResolvedOptions>;
}

/**
 * Creates the engine that serves MCP over Streamable HTTP with SEP-1699 polling. Mount it with
 * `mcpExpress(handler)`, `mcpKoa(handler)`, `mcpNext(handler)` or `toFetchHandler(handler)`.
 *
 * @example
 * const mcp = createMcpHandler({ server: () => buildServer(), retryMs: 2_000 });
 * app.use('/mcp', mcpExpress(mcp));
 */
export function createMcpHandler(options: McpHandlerOptions): McpHandler {
  const opts = resolveOptions(options);
  const registry = new SessionRegistry(opts);
  const supported: readonly string[] = SUPPORTED_PROTOCOL_VERSIONS;

  function fail(responder: CoreResponder, r: Rejection): void {
    responder.send(r.status, r.headers ? { ...JSON_HEADERS, ...r.headers } : JSON_HEADERS, errorBody(r.code, r.message));
  }

  /** A CoreRequest carries everything a session passes on to handlers: no copy per request. */
  function inboundOf(req: CoreRequest): Inbound {
    return req;
  }

  /** Finds the session a request names; rejects a missing, unknown or foreign one. */
  function lookup(req: CoreRequest): Session | Rejection {
    const id = header(req.headers, 'mcp-session-id');
    if (id === undefined || id === '') {
      return reject(400, ErrorCode.ServerError, 'Bad Request: Mcp-Session-Id header is required (send initialize first to get one)');
    }
    const session = registry.get(id);
    if (!session) return reject(404, ErrorCode.SessionNotFound, 'Session not found: it expired or was deleted; initialize a new session');
    const principal = principalOf(req.authInfo);
    if (session.owner !== undefined && session.owner !== principal) {
      return reject(403, ErrorCode.ServerError, 'Forbidden: this session belongs to another principal');
    }
    const version = checkProtocolVersion(header(req.headers, 'mcp-protocol-version'), supported);
    if (!version.ok) return version;
    session.lastActive = Date.now();
    return session;
  }

  /**
   * In cluster mode, a session {@link lookup} did not find here may be another instance's; a
   * request another instance forwarded here as to the owner is never bounced on.
   */
  function maybeElsewhere(found: Session | Rejection, req: CoreRequest): found is Rejection {
    return (
      opts.cluster !== undefined &&
      !('sessionId' in found) &&
      found.code === ErrorCode.SessionNotFound &&
      header(req.headers, FORWARDED_HEADER) === undefined
    );
  }

  /** Asks the cluster who owns a session that is not here: another instance (forward, or resume from the shared store), or nobody (404). */
  async function locate(req: CoreRequest): Promise<Rejection | RemoteSession> {
    const cluster = opts.cluster as SessionCluster;
    const id = header(req.headers, 'mcp-session-id') as string;
    let owner: SessionOwner | undefined;
    try {
      owner = await cluster.lookupOwner(id);
    } catch (error) {
      opts.onError(asError(error, 'cluster lookupOwner failed'));
      return unavailable('the session directory');
    }
    if (!owner || owner.self) {
      return reject(
        404,
        ErrorCode.SessionNotFound,
        'Session not found: it expired, was deleted, or the server instance that held it is gone; initialize a new session',
      );
    }
    if (owner.principal !== undefined && owner.principal !== principalOf(req.authInfo)) {
      return reject(403, ErrorCode.ServerError, 'Forbidden: this session belongs to another principal');
    }
    const version = checkProtocolVersion(header(req.headers, 'mcp-protocol-version'), supported);
    if (!version.ok) return version;
    return { remote: owner, id };
  }

  /** Serves a request for another instance's session there, relaying its answer. */
  async function forward(req: CoreRequest, res: CoreResponder, session: RemoteSession, body: string | undefined): Promise<void> {
    try {
      await (opts.cluster as SessionCluster).forward(
        session.remote,
        { method: req.method.toUpperCase(), headers: req.headers, body, url: req.url },
        res,
      );
    } catch (error) {
      opts.onError(asError(error, `forwarding to instance ${session.remote.instanceId} failed`));
      fail(
        res,
        reject(502, ErrorCode.ServerError, 'Bad Gateway: the server instance that owns this session did not answer; retry later', {
          'retry-after': '1',
        }),
      );
    }
  }

  /**
   * The version a session negotiated at initialize decides priming, polling and batches; the
   * request header only stands in when the session did not learn one (stateless requests).
   */
  function versionOf(req: CoreRequest, session: Session | undefined): string {
    return session?.protocolVersion ?? header(req.headers, 'mcp-protocol-version') ?? DEFAULT_NEGOTIATED_VERSION;
  }

  function polls(version: string): boolean {
    return opts.legacyPolling || version >= FIRST_POLLING_VERSION;
  }

  async function readJson(req: CoreRequest): Promise<{ ok: true; body: unknown } | Rejection> {
    let text: string;
    if (req.hasParsedBody) {
      // A body parser ran before us. Buffers and strings come from raw/text parsers: parse them.
      const parsed = req.parsedBody;
      if (typeof parsed === 'string') text = parsed;
      else if (parsed instanceof Uint8Array) text = new TextDecoder().decode(parsed);
      else return { ok: true, body: parsed };
    } else {
      const read = await req.readBody(opts.maxBodyBytes);
      if (!read.ok) {
        return read.tooLarge
          ? reject(413, ErrorCode.InvalidRequest, `Payload Too Large: the body exceeds ${opts.maxBodyBytes} bytes (maxBodyBytes)`)
          : reject(400, ErrorCode.InvalidRequest, `Bad Request: could not read the body: ${read.error.message}`);
      }
      text = read.text;
    }
    try {
      return { ok: true, body: JSON.parse(text) };
    } catch (error) {
      return reject(400, ErrorCode.ParseError, `Parse error: ${(error as Error).message}`);
    }
  }

  /**
   * Connects a new server from the user's factory to the session; a factory that throws is the
   * application's bug, so the client gets a 500 and `onError` the cause.
   */
  async function connectServer(session: Session, res: CoreResponder): Promise<boolean> {
    try {
      await newServer(session, false);
      return true;
    } catch (error) {
      session.terminate(undefined);
      opts.onError(asError(error, 'server factory failed'));
      res.send(500, JSON_HEADERS, errorBody(-32603, 'Internal error: could not create the MCP server'));
      return false;
    }
  }

  async function newServer(session: Session, restoring: boolean): Promise<void> {
    const server: ConnectableServer = await opts.server({ sessionId: session.sessionId, restoring });
    if (!server || typeof (server as { connect?: unknown }).connect !== 'function') {
      throw new TypeError('createMcpHandler: the `server` factory must return an McpServer (or SDK Server) with connect()');
    }
    session.attachServer(server);
    await server.connect(session);
  }

  /**
   * A hibernated session gets a new server, brought up to date, before its request goes in. If
   * that fails the session cannot go on: it ends (500 now, 404 next, and the client re-initializes).
   */
  async function wake(session: Session, res: CoreResponder): Promise<boolean> {
    session.waking ??= newServer(session, true)
      .then(() => session.restore())
      .finally(() => {
        session.waking = undefined;
      });
    try {
      await session.waking;
    } catch (error) {
      session.terminate(undefined);
      opts.onError(asError(error, 'restoring a hibernated session failed'));
      res.send(500, JSON_HEADERS, errorBody(-32603, 'Internal error: could not restore the MCP server of this session'));
      return false;
    }
    if (!session.closed) return true;
    fail(res, reject(404, ErrorCode.SessionNotFound, 'Session not found: it expired or was deleted; initialize a new session'));
    return false;
  }

  async function post(req: CoreRequest, res: CoreResponder): Promise<void> {
    let v = checkAccept('POST', header(req.headers, 'accept'));
    if (!v.ok) return fail(res, v);
    v = checkContentType(header(req.headers, 'content-type'));
    if (!v.ok) return fail(res, v);
    const read = await readJson(req);
    if (!read.ok) return fail(res, read);
    const body = read.body;

    if (opts.stateless) return postStateless(req, res, body);

    const isInitialize =
      !Array.isArray(body) && typeof body === 'object' && body !== null && (body as { method?: unknown }).method === 'initialize';
    if (isInitialize) return initialize(req, res, body);

    let found: Session | Rejection | RemoteSession = lookup(req);
    if (maybeElsewhere(found, req)) found = await locate(req);
    if ('remote' in found) return forward(req, res, found, JSON.stringify(body));
    if (!('sessionId' in found)) return fail(res, found);
    const session = found;
    const parsed = parseMessages(body, allowsBatches(versionOf(req, session)));
    if (!parsed.ok) return fail(res, parsed);
    if (session.hibernated && !(await wake(session, res))) return;
    for (const id of parsed.requestIds) {
      if (session.isInFlight(id))
        return fail(
          res,
          reject(400, ErrorCode.InvalidRequest, `Invalid Request: request id ${JSON.stringify(id)} is already in flight in this session`),
        );
    }
    if (parsed.requestIds.length === 0) {
      session.dispatch(parsed.messages, inboundOf(req));
      return res.send(202, {}, undefined);
    }
    await respond(req, res, session, parsed, versionOf(req, session));
  }

  async function initialize(req: CoreRequest, res: CoreResponder, body: unknown): Promise<void> {
    const parsed = parseMessages(body, false);
    if (!parsed.ok) return fail(res, parsed);
    // Without an id nothing answers it: a session would open on a stream that never ends.
    if (!parsed.initialize)
      return fail(res, reject(400, ErrorCode.InvalidRequest, 'Invalid Request: initialize must be a request, with an "id"'));
    if (header(req.headers, 'mcp-session-id') !== undefined) {
      return fail(
        res,
        reject(400, ErrorCode.InvalidRequest, 'Invalid Request: initialize must not carry Mcp-Session-Id; it starts a new session'),
      );
    }
    if (registry.full) {
      return fail(
        res,
        reject(503, ErrorCode.ServerError, `Service Unavailable: the session limit (${opts.maxSessions}) is reached; retry later`, {
          'retry-after': '5',
        }),
      );
    }
    const session = registry.create();
    session.owner = principalOf(req.authInfo);
    if (opts.cluster && !(await claim(opts.cluster, session, res))) return;
    if (!(await connectServer(session, res))) return;
    const requested = (parsed.messages[0] as { params?: { protocolVersion?: unknown } }).params?.protocolVersion;
    const version = typeof requested === 'string' && supported.includes(requested) ? requested : LATEST_PROTOCOL_VERSION;
    await respond(req, res, session, parsed, version);
  }

  /** Records this instance as the session's owner before any instance can be asked for it. */
  async function claim(cluster: SessionCluster, session: Session, res: CoreResponder): Promise<boolean> {
    try {
      await cluster.claim(session.sessionId as string, session.owner);
      return true;
    } catch (error) {
      session.terminate(undefined);
      opts.onError(asError(error, 'cluster claim failed'));
      fail(res, unavailable('the session directory'));
      return false;
    }
  }

  /**
   * Registers a stream with the store before its priming event promises a cursor into it. A
   * synchronous store (the memory store) answers without a promise, so a POST takes no extra hop.
   */
  function registerStream(session: Session, stream: Stream, res: CoreResponder): boolean | Promise<boolean> {
    let created: void | Promise<void>;
    try {
      created = opts.eventStore.createStream(session.streamKey(stream));
    } catch (error) {
      return storeFailed(session, stream, res, error);
    }
    if (created === undefined) return true;
    return Promise.resolve(created).then(
      () => true,
      (error: unknown) => storeFailed(session, stream, res, error),
    );
  }

  function storeFailed(session: Session, stream: Stream, res: CoreResponder, error: unknown): false {
    session.dropStream(stream);
    opts.onError(asError(error, 'event store createStream failed'));
    fail(
      res,
      reject(503, ErrorCode.ServerError, 'Service Unavailable: the event store is unavailable; retry later', { 'retry-after': '1' }),
    );
    return false;
  }

  /** Response headers of a session's SSE streams: the same every time, so built once per session. */
  function sseHeaders(session: Session): OutHeaders {
    if (session.sessionId === undefined) return SSE_HEADERS;
    return (session.responseHeaders.sse ??= { ...SSE_HEADERS, 'mcp-session-id': session.sessionId });
  }

  function jsonHeaders(session: Session): OutHeaders {
    if (session.sessionId === undefined) return JSON_HEADERS;
    return (session.responseHeaders.json ??= { ...JSON_HEADERS, 'mcp-session-id': session.sessionId });
  }

  /** Answers a POST that carries requests: one JSON body, or an SSE stream. */
  async function respond(req: CoreRequest, res: CoreResponder, session: Session, parsed: ParsedBody, version: string): Promise<void> {
    if (opts.jsonResponse) {
      const stream = session.openRequestStream(parsed.requestIds, false, false);
      stream.json = {
        messages: [],
        batch: parsed.batch,
        respond: (text) => res.send(200, jsonHeaders(session), text),
      };
      session.dispatch(parsed.messages, inboundOf(req));
      return;
    }
    const resumable = session.sessionId !== undefined;
    const stream = session.openRequestStream(parsed.requestIds, resumable, resumable && polls(version));
    if (resumable) {
      const registered = registerStream(session, stream, res);
      if (registered !== true && !(await registered)) return;
    }
    const conn = session.newConnection(res.stream(sseHeaders(session)));
    if (stream.closable) session.prime(stream.id, 0, conn);
    session.attach(stream, conn);
    session.dispatch(parsed.messages, inboundOf(req));
  }

  async function postStateless(req: CoreRequest, res: CoreResponder, body: unknown): Promise<void> {
    const parsed = parseMessages(body, allowsBatches(versionOf(req, undefined)));
    if (!parsed.ok) return fail(res, parsed);
    const v = checkProtocolVersion(header(req.headers, 'mcp-protocol-version'), supported);
    if (!v.ok) return fail(res, v);
    const session = registry.ephemeral();
    if (!(await connectServer(session, res))) return;
    if (parsed.requestIds.length === 0) {
      session.dispatch(parsed.messages, inboundOf(req));
      res.send(202, {}, undefined);
      // Notification handlers run on the next ticks; give them a turn before closing.
      setImmediate(() => session.terminate(undefined));
      return;
    }
    await respond(req, res, session, parsed, versionOf(req, undefined));
  }

  async function get(req: CoreRequest, res: CoreResponder): Promise<void> {
    const v = checkAccept('GET', header(req.headers, 'accept'));
    if (!v.ok) return fail(res, v);
    let found: Session | Rejection | RemoteSession = lookup(req);
    if (maybeElsewhere(found, req)) found = await locate(req);
    const lastEventId = header(req.headers, 'last-event-id');
    if ('remote' in found) {
      if (lastEventId === undefined || lastEventId === '') return forward(req, res, found, undefined);
      return remoteResume(res, found, lastEventId, polls(versionOf(req, undefined)));
    }
    if (!('sessionId' in found)) return fail(res, found);
    const session = found;
    const modern = polls(versionOf(req, session));
    if (lastEventId === undefined || lastEventId === '') {
      const isNew = !session.hasStandalone;
      const stream = session.standaloneStream(true, modern);
      if (isNew) {
        const registered = registerStream(session, stream, res);
        if (registered !== true && !(await registered)) return;
      }
      const conn = session.newConnection(res.stream(sseHeaders(session)));
      if (modern) session.prime(stream.id, stream.seq, conn);
      session.attach(stream, conn);
      return;
    }
    return resume(req, res, session, lastEventId, modern);
  }

  /** `GET` + `Last-Event-ID`: replay what the stream missed, then follow it live until it completes. */
  async function resume(req: CoreRequest, res: CoreResponder, session: Session, lastEventId: string, modern: boolean): Promise<void> {
    const cursor = parseEventId(lastEventId);
    if (!cursor) {
      return fail(
        res,
        reject(400, ErrorCode.InvalidRequest, `Bad Request: malformed Last-Event-ID ${JSON.stringify(lastEventId.slice(0, 80))}`),
      );
    }
    const sessionId = session.sessionId as string;
    let result: ReplayResult;
    try {
      result = await opts.eventStore.replayAfter(sessionId, cursor.streamId, cursor.seq);
    } catch (error) {
      opts.onError(asError(error, 'event store replay failed'));
      return fail(
        res,
        reject(503, ErrorCode.ServerError, 'Service Unavailable: the event store is unavailable; retry later', { 'retry-after': '1' }),
      );
    }
    if (!result.ok) return fail(res, replayRejection(result.reason));
    let last = result.lastSeq;
    let complete = result.complete;
    const conn = session.newConnection(res.stream(sseHeaders(session)));
    let active = session.activeStream(cursor.streamId);
    const closable = active ? active.closable : modern;
    if (closable) session.prime(cursor.streamId, cursor.seq, conn, active?.retryMs ?? opts.retryMs);
    // A slow reader makes the replay wait, and the stream may go on (or finish) meanwhile; an async
    // store may not yet hold every frame the stream assigned. Catch up from the store until nothing
    // is missing, then go live. (A stream gone but not complete finished while we read: its final
    // frame is stored before it leaves the session, so one more read gets it.)
    await conn.replay(result.frames);
    while (!complete && !conn.closed && !session.closed) {
      active = session.activeStream(cursor.streamId);
      if (active && active.seq <= last) break;
      let more: ReplayResult;
      try {
        more = await opts.eventStore.replayAfter(sessionId, cursor.streamId, last);
      } catch (error) {
        opts.onError(asError(error, 'event store replay failed'));
        return conn.end(opts.retryMs);
      }
      // Evicted while the client read: it comes back with its last id and hears 410.
      if (!more.ok) return conn.end(opts.retryMs);
      const progressed = more.lastSeq > last;
      last = more.lastSeq;
      complete = more.complete;
      await conn.replay(more.frames);
      // Gone from the session with nothing more stored (deleted, or dropped): nothing to wait for.
      if (!progressed && !active) break;
    }
    active = session.activeStream(cursor.streamId);
    if (conn.closed) return;
    if (session.closed) return conn.end(closing ? opts.retryMs : undefined);
    if (complete || !active) return conn.end();
    conn.skipThrough = last;
    session.attach(active, conn);
  }

  /**
   * `GET` + `Last-Event-ID` for a session another instance owns: replay from the shared store, then
   * follow what the owner keeps appending (`eventStore.subscribe`) until the stream completes, as
   * the owner would. The subscription starts before the response, so a store failure is a 503.
   */
  async function remoteResume(res: CoreResponder, session: RemoteSession, lastEventId: string, modern: boolean): Promise<void> {
    const cursor = parseEventId(lastEventId);
    if (!cursor) return fail(res, malformedCursor(lastEventId));
    const store = opts.eventStore;
    let result: ReplayResult;
    try {
      result = await store.replayAfter(session.id, cursor.streamId, cursor.seq);
    } catch (error) {
      opts.onError(asError(error, 'event store replay failed'));
      return fail(res, unavailable('the event store'));
    }
    if (!result.ok) return fail(res, replayRejection(result.reason));
    // The pace the tool last set (closeSSEStream), where the store keeps it; else the handler's.
    const retryMs = result.retryMs ?? opts.retryMs;
    let conn: SseConnection | undefined = undefined;
    // Frames the subscription delivers before the response exists; at most one store round trip's worth.
    const early: Array<[frame: string, seq: number, final: boolean]> = [];
    let ended: { retryMs: number | undefined } | undefined;
    let subscription: StreamSubscription | undefined;
    if (!result.complete && store.subscribe) {
      const listener: StreamListener = {
        frame(frame, seq, final) {
          if (!conn) return void early.push([frame, seq, final]);
          conn.write(frame, seq);
          if (final) conn.end();
        },
        end(reason) {
          // A deleted session ends like a local one; a broken tail asks the client to come back.
          const hint = reason === 'error' ? retryMs : undefined;
          if (!conn) ended = { retryMs: hint };
          else conn.end(hint);
        },
        closed(closeRetryMs) {
          if (!conn) ended = { retryMs: closeRetryMs };
          else conn.end(closeRetryMs);
        },
      };
      try {
        subscription = await store.subscribe({ sessionId: session.id, streamId: cursor.streamId }, result.lastSeq, listener);
      } catch (error) {
        opts.onError(asError(error, 'event store subscribe failed'));
        return fail(res, unavailable('the event store'));
      }
    }
    const live = new SseConnection(
      res.stream({ ...SSE_HEADERS, 'mcp-session-id': session.id }),
      opts.maxBufferedBytes,
      (c) => c.end(retryMs),
      Date.now(),
    );
    registry.live.add(live);
    const timers: Array<ReturnType<typeof setTimeout>> = [];
    live.onClose(() => {
      registry.live.delete(live);
      subscription?.cancel();
      for (const t of timers) clearTimeout(t);
    });
    if (modern) live.write(primingEvent(eventId(cursor.streamId, cursor.seq), retryMs));
    // What the tail delivers while a slow reader holds the replay up waits in `early`.
    await live.replay(result.frames);
    conn = live;
    live.skipThrough = result.lastSeq;
    // Without a live tail the client polls: it comes back after the retry hint for the rest.
    if (result.complete || !subscription) return live.end(result.complete ? undefined : retryMs);
    for (const [frame, seq, final] of early) {
      live.write(frame, seq);
      if (final) live.end();
    }
    if (ended) live.end(ended.retryMs);
    if (live.closed) return;
    const cluster = opts.cluster as SessionCluster;
    const touch = () => {
      try {
        void Promise.resolve(cluster.touch?.(session.id)).catch(() => {});
      } catch {
        // Best effort: the owner only uses it to keep the session from idling out.
      }
    };
    touch();
    // The owner may die mid-call; nobody appends then, so check, and send the client back for its 404.
    const check = setInterval(() => {
      touch();
      cluster.lookupOwner(session.id).then(
        (owner) => {
          if (!owner || owner.self) live.end(retryMs);
        },
        () => {}, // a directory hiccup is not a verdict; the next check decides
      );
    }, cluster.ownerCheckMs ?? 5_000);
    check.unref?.();
    timers.push(check);
    if (opts.maxStreamDurationMs !== undefined && modern) {
      timers.push(setTimeout(() => live.end(retryMs), opts.maxStreamDurationMs));
    }
  }

  async function del(req: CoreRequest, res: CoreResponder): Promise<void> {
    let found: Session | Rejection | RemoteSession = lookup(req);
    if (maybeElsewhere(found, req)) found = await locate(req);
    if ('remote' in found) return forward(req, res, found, undefined);
    if (!('sessionId' in found)) return fail(res, found);
    found.terminate(undefined);
    res.send(200, {}, undefined);
  }

  /** Set by close(): from then on nothing new starts that the shutdown would have to wait for. */
  let closing = false;

  async function handle(req: CoreRequest, res: CoreResponder): Promise<void> {
    if (closing) {
      const retryAfter = String(Math.max(1, Math.ceil(opts.retryMs / 1000)));
      return fail(
        res,
        reject(503, ErrorCode.ServerError, 'Service Unavailable: the server is shutting down; retry later', { 'retry-after': retryAfter }),
      );
    }
    const method = req.method.toUpperCase();
    const allowed = checkMethod(method, opts.stateless);
    if (!allowed.ok) return fail(res, allowed);
    const protect = opts.dnsRebindingProtection === true || (opts.dnsRebindingProtection === 'auto' && isLoopbackAddress(req.localAddress));
    if (protect) {
      const v = checkHostAndOrigin(header(req.headers, 'host'), header(req.headers, 'origin'), opts);
      if (!v.ok) return fail(res, v);
    }
    if (method === 'POST') return post(req, res);
    if (method === 'GET') return get(req, res);
    return del(req, res);
  }

  return {
    handle,
    async close() {
      closing = true;
      registry.close(opts.retryMs);
      await opts.cluster?.close?.();
      await opts.eventStore.close?.();
    },
    get sessionCount() {
      return registry.size;
    },
    get hibernatedSessionCount() {
      return registry.hibernatedCount;
    },
    options: opts,
  };
}

function unavailable(what: string): Rejection {
  return reject(503, ErrorCode.ServerError, `Service Unavailable: ${what} is unavailable; retry later`, { 'retry-after': '1' });
}

function malformedCursor(lastEventId: string): Rejection {
  return reject(400, ErrorCode.InvalidRequest, `Bad Request: malformed Last-Event-ID ${JSON.stringify(lastEventId.slice(0, 80))}`);
}

function replayRejection(reason: 'unknown' | 'evicted'): Rejection {
  return reason === 'evicted'
    ? reject(
        410,
        ErrorCode.ServerError,
        'Gone: the events after this Last-Event-ID were evicted by the event store retention limits; this stream cannot be resumed without loss',
      )
    : reject(
        404,
        ErrorCode.ServerError,
        "Not Found: Last-Event-ID names no event of this session (unknown, another session's, or past the end of its stream)",
      );
}

function principalOf(authInfo: AuthInfo | undefined): string | undefined {
  if (!authInfo) return undefined;
  const sub = (authInfo.extra as { sub?: unknown } | undefined)?.sub;
  return `${authInfo.clientId}\u0000${typeof sub === 'string' ? sub : ''}`;
}

export type { JSONRPCMessage };
