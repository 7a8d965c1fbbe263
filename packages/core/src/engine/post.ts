import { LATEST_LEGACY_VERSION, type JSONRPCMessage, type JSONRPCRequest } from '../ports/mcp.js';
import { answerKey } from '../session/initialize-answers.js';
import { ErrorCode, reject, sendRejection, unavailable } from '../http/errors.js';
import { allowsBatches, parseMessages, readableId, type ParsedBody } from '../http/messages.js';
import { checkAccept, checkContentType, checkProtocolVersion, header, principalOf } from '../http/rules.js';
import { FORWARDED_HEADER } from '../ports/hops.js';
import type { CoreRequest, CoreResponder } from '../ports/http.js';
import type { Session } from '../session/session.js';
import { asError } from '../util/errors.js';
import { serveModern, TASK_METHODS } from '../modern/serve.js';
import { toolsCalled } from '../auth/resource-server.js';
import { readJson } from './body.js';
import { classifyPost, eraNotServed } from './classify.js';
import { turnedAway } from './drain.js';
import { HeldResponse } from './held.js';
import { keepAlive } from './call-lifetime.js';
import type { EngineContext } from './context.js';
import { withSession } from './resolve.js';
import { holderOf } from './holder.js';
import { randomId } from '../events/ids.js';
import { connectServer, wake } from './connect-server.js';

/**
 * `POST`: a JSON-RPC message (or, before 2025-06-18, a batch) from the client. A 2026-07-28
 * request is served on its own (`modern/serve.ts`); of the 2025 era, `initialize` opens a session
 * and anything else goes to the session it names, here or on its owner.
 */
export async function servePost(ctx: EngineContext, req: CoreRequest, res: CoreResponder): Promise<void> {
  let v = checkAccept('POST', header(req.headers, 'accept'));
  if (!v.ok) return sendRejection(res, v);
  v = checkContentType(header(req.headers, 'content-type'));
  if (!v.ok) return sendRejection(res, v);
  const read = await readJson(req, ctx.options.maxBodyBytes);
  if (!read.ok) return sendRejection(res, read);
  const body = read.body;
  // As it came (a framework's parser may have read it): relayed when the request goes elsewhere.
  const text = (): string => read.text ?? JSON.stringify(body);
  const era = classifyPost(body, req.headers);
  // These refuse the request before any session or server sees it: its id may be echoed.
  if (typeof era !== 'string') return sendRejection(res, era, readableId(body));
  if (!ctx.options.eras[era]) return sendRejection(res, eraNotServed(era, body, req.headers), readableId(body));
  // A tool that needs more scopes than the token has: 403 before a session or server sees the call (auth/).
  const scoped = ctx.options.auth?.checkRead(req, toolsCalled(body));
  if (scoped && !scoped.ok) return sendRejection(res, scoped, readableId(body));
  if (ctx.options.telemetry.on) ctx.facts.set(req, factsOf(era, body));
  const sessionless = era === 'modern' || ctx.options.stateless || isInitialize(body);
  // Draining: nothing new starts here (without a cluster, a session's own requests still do, and
  // so do tasks/* for the tasks the drain waits for: their results go with this process).
  const forTask = era === 'modern' && TASK_METHODS.has((body as { method?: string }).method ?? '');
  if (sessionless && ctx.drain.started && !forTask) {
    if (!ctx.cluster) return sendRejection(res, turnedAway(ctx));
    if (await ctx.cluster.handOver(req, res, text)) return;
  }
  if (era === 'modern') return serveModern(ctx, req, res, body);
  if (ctx.options.stateless) return serveStateless(ctx, req, res, body);
  if (isInitialize(body)) return serveInitialize(ctx, req, res, body);
  return withSession(ctx, req, res, { body: text }, (session) => serveInSession(ctx, req, res, session, body));
}

async function serveInSession(ctx: EngineContext, req: CoreRequest, res: CoreResponder, session: Session, body: unknown): Promise<void> {
  const version = ctx.versionOf(req, session);
  const parsed = parseMessages(body, allowsBatches(version));
  if (!parsed.ok) return sendRejection(res, parsed);
  // A server built for it hears `notifications/initialized` when the session's initialize is
  // replayed to it: the client's own needs no server (a session that only initializes costs none).
  if (session.hibernated && parsed.messages.every(isInitialized)) return res.send(202, {}, undefined);
  if (session.hibernated && !(await wake(ctx, session, res))) return;
  for (const id of parsed.requestIds) {
    if (session.isInFlight(id)) {
      return sendRejection(
        res,
        reject(400, ErrorCode.InvalidRequest, `Invalid Request: request id ${JSON.stringify(id)} is already in flight in this session`),
      );
    }
  }
  if (ctx.cluster) {
    // What belongs to a call running on another instance (a client's answer, a cancel) goes there.
    const routed = ctx.cluster.routeMessages(session, parsed.messages);
    const here = routed instanceof Promise ? await routed : routed;
    if (!Array.isArray(here)) return sendRejection(res, here);
    parsed.messages = here;
  }
  if (parsed.requestIds.length === 0) {
    session.dispatch(parsed.messages, req);
    return res.send(202, {}, undefined);
  }
  await respond(ctx, req, res, session, parsed, version);
}

function isInitialized(message: JSONRPCMessage): boolean {
  return 'method' in message && message.method === 'notifications/initialized' && !('id' in message);
}

function isInitialize(body: unknown): boolean {
  return !Array.isArray(body) && typeof body === 'object' && body !== null && (body as { method?: unknown }).method === 'initialize';
}

/** `initialize`: a new session, opened in the cluster's directory before anyone can ask for it, with a server from the factory. */
async function serveInitialize(ctx: EngineContext, req: CoreRequest, res: CoreResponder, body: unknown): Promise<void> {
  const parsed = parseMessages(body, false);
  if (!parsed.ok) return sendRejection(res, parsed);
  // Without an id nothing answers it: a session would open on a stream that never ends.
  if (!parsed.initialize)
    return sendRejection(res, reject(400, ErrorCode.InvalidRequest, 'Invalid Request: initialize must be a request, with an "id"'));
  if (header(req.headers, 'mcp-session-id') !== undefined) {
    return sendRejection(
      res,
      reject(400, ErrorCode.InvalidRequest, 'Invalid Request: initialize must not carry Mcp-Session-Id; it starts a new session'),
    );
  }
  const principal = principalOf(req.authInfo);
  const holder = holderOf(ctx, req);
  if (!ctx.registry.makeRoom(holder)) {
    const message = `Service Unavailable: the session limit (${ctx.options.maxSessions} in all, or per principal) is reached and every session is busy; retry later`;
    return sendRejection(res, reject(503, ErrorCode.ServerError, message, { 'retry-after': '5' }));
  }
  // In a cluster, what bounds one client's sessions in the deployment (its quota, if it has one).
  const sessionId = randomId();
  const refused = await ctx.cluster?.admit(holder, sessionId);
  if (refused) return sendRejection(res, refused, readableId(body));
  const session = ctx.registry.create(principal, holder, sessionId);
  // Until its answer's stream is open, nothing may take it for an idle session and let it go.
  await session.arrivals.visit(() => openSession(ctx, req, res, session, parsed));
}

/**
 * A new session's `initialize`: opened in the cluster, answered (by a server from the factory, or
 * with what one answered the same request: see `lazyServers`), the answer's stream opened (or the
 * refusal sent).
 */
async function openSession(ctx: EngineContext, req: CoreRequest, res: CoreResponder, session: Session, parsed: ParsedBody): Promise<void> {
  if (!(await openInCluster(ctx, session, res))) return;
  const answers = ctx.initializeAnswers;
  const key = answers && answerKey(parsed.initialize!, session.principal);
  const known = key === undefined ? undefined : answers!.find(key);
  if (!known && !(await connectServer(ctx, session, res))) return;
  // The first of its kind: a server answers it, and later sessions that ask the same get its answer.
  if (!known && key !== undefined) session.server.answeredInitialize = (result) => answers!.learn(key, result);
  const requested = (parsed.messages[0] as JSONRPCMessage & { params?: { protocolVersion?: unknown } }).params?.protocolVersion;
  const version = typeof requested === 'string' && ctx.supportedVersions.includes(requested) ? requested : LATEST_LEGACY_VERSION;
  // Where the record is the session (shared mode), the other instances know it once its record is
  // saved; until then its id goes to nobody. Its answer is held, and refused if the record cannot be
  // saved (invariant: stored-before-success).
  const recorded = ctx.registry.recorded(session);
  const held = recorded && new HeldResponse(res);
  recorded?.then(
    () => held!.release(),
    (error: unknown) => {
      ctx.options.onError(asError(error, 'cluster saveRecord failed'));
      held!.refuse(unavailable('the session directory'));
      session.terminate(undefined, 'error');
    },
  );
  // A session whose stream could not open (the store refused it: 503) is of no use to anybody.
  if (!(await respond(ctx, req, held || res, session, parsed, version, known))) session.terminate(undefined, 'error');
}

/** In a cluster, the directory knows the new session before any instance can be asked for it. */
async function openInCluster(ctx: EngineContext, session: Session, res: CoreResponder): Promise<boolean> {
  if (!ctx.cluster) return true;
  try {
    await ctx.cluster.open(session);
    return true;
  } catch (error) {
    session.terminate(undefined);
    ctx.options.onError(asError(error, 'cluster open failed'));
    sendRejection(res, unavailable('the session directory'));
    return false;
  }
}

/** `stateless: true`: a server per POST, nothing resumable. */
async function serveStateless(ctx: EngineContext, req: CoreRequest, res: CoreResponder, body: unknown): Promise<void> {
  const parsed = parseMessages(body, allowsBatches(ctx.versionOf(req, undefined)));
  if (!parsed.ok) return sendRejection(res, parsed);
  const v = checkProtocolVersion(header(req.headers, 'mcp-protocol-version'), ctx.supportedVersions);
  if (!v.ok) return sendRejection(res, v);
  const session = ctx.registry.ephemeral();
  if (!(await connectServer(ctx, session, res))) return;
  if (parsed.requestIds.length === 0) {
    session.dispatch(parsed.messages, req);
    res.send(202, {}, undefined);
    // Notification handlers run on the next ticks; give them a turn before closing.
    setImmediate(() => session.terminate(undefined));
    return;
  }
  await respond(ctx, req, res, session, parsed, ctx.versionOf(req, undefined));
}

/**
 * Answers a POST that carries requests: one JSON body, or an SSE stream the answers and their
 * notifications go on. `false` when the stream could not be opened (the store refused it: 503).
 */
async function respond(
  ctx: EngineContext,
  req: CoreRequest,
  res: CoreResponder,
  session: Session,
  parsed: ParsedBody,
  version: string,
  /** The answer to the session's `initialize`, when no server is to answer it (see `lazyServers`). */
  initializeAnswer?: Record<string, unknown>,
): Promise<boolean> {
  const deliver = () => (initializeAnswer ? answerInitialize(session, parsed, initializeAnswer) : session.dispatch(parsed.messages, req));
  if (ctx.options.jsonResponse) {
    const reply = session.openJsonReply(parsed.requestIds, {
      messages: [],
      batch: parsed.batch,
      respond: (text) => (text === undefined ? res.send(202, session.headers.json, undefined) : res.send(200, session.headers.json, text)),
    });
    keepAlive(ctx.options, session, reply, req);
    // A request a peer forwarded: it hears that the request was taken before any tool runs (the
    // answer itself comes when the calls are done; see `SessionOwners.forward`).
    if (req.headers[FORWARDED_HEADER] !== undefined) res.acknowledge?.();
    deliver();
    return true;
  }
  const resumable = session.sessionId !== undefined;
  const stream = session.openRequestStream(parsed.requestIds, resumable, resumable && ctx.polling(version));
  // Whoever resumes it reads the calls' results: with the scopes of their tools (auth/).
  if (resumable) ctx.options.auth?.streamOpened(session.sessionId as string, stream.id, parsed.messages);
  const opened = session.openStream(stream, res, resumable);
  if (opened !== true && !(await opened)) return false;
  keepAlive(ctx.options, session, stream, req);
  // A request a peer forwarded: the head goes out before any tool runs. The peer takes a
  // connection that breaks before any head for a request that ran nowhere, and serves it itself
  // once this instance is gone (see `SessionOwners.forward`).
  if (req.headers[FORWARDED_HEADER] !== undefined) stream.connection?.sendNow();
  deliver();
  return true;
}

/**
 * Answers the client's `initialize` with `result`, what a server of the factory answered the same
 * request (see `lazyServers`): the session has no server until a request needs one. A save of its
 * record that fails reaches the answer through `SessionRegistry.recorded`.
 */
function answerInitialize(session: Session, parsed: ParsedBody, result: Record<string, unknown>): void {
  const initialize = parsed.initialize as JSONRPCRequest;
  session.server.defer(initialize);
  session.send({ jsonrpc: '2.0', id: initialize.id, result }).catch(() => {});
}

/** The era, method and tool of a single message, for telemetry. */
function factsOf(era: 'legacy' | 'modern', body: unknown): { era: 'legacy' | 'modern'; mcpMethod?: string; tool?: string } {
  const message = (Array.isArray(body) ? undefined : body) as { method?: unknown; params?: { name?: unknown } } | undefined;
  const mcpMethod = typeof message?.method === 'string' ? message.method : undefined;
  const tool = mcpMethod === 'tools/call' && typeof message?.params?.name === 'string' ? message.params.name : undefined;
  return { era, mcpMethod, tool };
}
