import type { JSONRPCRequest } from '../ports/mcp.js';
import { ErrorCode, reject, sendRejection, unavailable, type Rejection } from '../http/errors.js';
import { parseMessages, readableId } from '../http/messages.js';
import type { CoreRequest, CoreResponder } from '../ports/http.js';
import { principalOf } from '../http/rules.js';
import { messageExtra, requestInfoOf } from '../sdk/extra.js';
import { rememberParams } from '../sdk/input.js';
import { asError } from '../util/errors.js';
import type { EngineContext } from '../engine/context.js';
import { discoverResult } from './discover.js';
import { checkModernVersion, checkRoutingHeaders, ModernErrorCode, readEnvelope, type Envelope } from './envelope.js';
import { Exchange } from './exchange.js';
import { ListenStreams } from './listen.js';
import { checkParamHeaders } from './param-headers.js';
import { sendResult } from './results.js';
import { declaresTasks, tasksRequired } from './tasks.js';
import { HandshakeRefused, type ModernServer } from './server-pool.js';

/** Methods the 2026-07-28 revision removed: a server of that era does not have them (404, -32601). */
const REMOVED = new Set([
  'initialize',
  'ping',
  'logging/setLevel',
  'resources/subscribe',
  'resources/unsubscribe',
  'tasks/result',
  'tasks/list',
]);

/** The Tasks extension's methods (SEP-2663), answered by mcp-kit from the task store. */
export const TASK_METHODS = new Set(['tasks/get', 'tasks/update', 'tasks/cancel']);

/** A 2026 request, read and checked. */
interface ModernRequest {
  message: JSONRPCRequest;
  envelope: Envelope;
}

/**
 * A request of the 2026-07-28 era: no session, everything it needs in its `_meta`. Checked against
 * the revision (shape, envelope, routing headers, version), then answered by mcp-kit
 * (`server/discover`, `subscriptions/listen`, removed methods) or by a server of the client's kind.
 */
export async function serveModern(ctx: EngineContext, req: CoreRequest, res: CoreResponder, body: unknown): Promise<void> {
  const checked = checkModernRequest(req, body);
  if ('ok' in checked) return sendRejection(res, checked, readableId(body));
  const { message, envelope } = checked;
  // A notification of this era has nothing to answer (cancellation is a closed stream on HTTP).
  if (!('id' in message)) return res.send(202, {}, undefined);
  const id = message.id;
  if (REMOVED.has(message.method)) return sendRejection(res, notFound(message.method), id);
  if (TASK_METHODS.has(message.method)) {
    if (!ctx.tasks) return sendRejection(res, notFound(message.method), id);
    try {
      return await ctx.tasks.serve(req, res, message, envelope);
    } catch (error) {
      // A store that failed (a Redis blip) is the documented 503, never the framework's 500.
      ctx.options.onError(asError(error, `task store failed during ${message.method}`));
      return sendRejection(res, unavailable('the task store'), id);
    }
  }
  let server: ModernServer;
  try {
    server = await ctx.modern.acquire(envelope, principalOf(req.authInfo));
  } catch (error) {
    // The client's declarations do not fit the server's schema: the request's fault, not ours.
    if (error instanceof HandshakeRefused) return sendRejection(res, reject(400, -32602, `Invalid _meta envelope: ${error.message}`), id);
    ctx.options.onError(asError(error, 'building a server for a 2026-era request failed'));
    return sendRejection(res, reject(500, ErrorCode.InternalError, 'Internal error: could not create the MCP server'), id);
  }
  if (message.method === 'server/discover') return sendResult(res, id, discoverResult(server.handshake, ctx.extensions));
  if (message.method === 'subscriptions/listen') return await listen(ctx, req, res, checked, server);
  dispatch(ctx, req, res, checked, server);
}

/** Shape (one request or notification), envelope, headers and version, in the revision's order. */
function checkModernRequest(req: CoreRequest, body: unknown): ModernRequest | Rejection {
  const parsed = parseMessages(body, false);
  if (!parsed.ok) return parsed;
  const message = parsed.messages[0] as JSONRPCRequest;
  if (!('method' in message))
    return reject(400, ErrorCode.InvalidRequest, 'Invalid Request: a client of the 2026-07-28 era posts requests and notifications only');
  const params = message.params as Record<string, unknown>;
  const envelope = readEnvelope(params);
  if ('ok' in envelope) return envelope;
  const headers = checkRoutingHeaders(req.headers, message.method, params, envelope.protocolVersion);
  if (headers) return headers;
  const version = checkModernVersion(envelope.protocolVersion);
  if (version) return version;
  return { message, envelope };
}

/**
 * Hands the request to the server, which answers through an {@link Exchange}. For a client that
 * declared the Tasks extension, a tool's `closeSSEStream(ctx, retryMs)` turns the call into a task
 * polled every `retryMs` (a tool marked `taskTool('required' | 'preferred')` is one from the start);
 * for any other 2026 client there is nothing to close (the revision has no resumable streams).
 */
function dispatch(ctx: EngineContext, req: CoreRequest, res: CoreResponder, run: ModernRequest, server: ModernServer): void {
  const { message, envelope } = run;
  const channel = server.channel;
  const tasks = ctx.tasks;
  const isCall = message.method === 'tools/call';
  const tool = isCall ? String(message.params?.name) : undefined;
  const mode = tool === undefined ? undefined : server.tools.taskModes.get(tool);
  const declaredHeaders = tool === undefined ? undefined : server.tools.paramHeaders.get(tool);
  if (declaredHeaders) {
    const mismatch = checkParamHeaders(declaredHeaders, message.params?.arguments, req.headers);
    if (mismatch) return sendRejection(res, mismatch, message.id);
  }
  const declared = tasks !== undefined && isCall && declaresTasks(envelope);
  if (mode === 'required' && !declared)
    return sendRejection(res, tasksRequired(`the tool ${JSON.stringify(message.params?.name)}`), message.id);
  let serverId = 0;
  const exchange = new Exchange(message.id, message.method, envelope, {
    res,
    live: ctx.registry.live,
    maxBufferedBytes: ctx.options.maxBufferedBytes,
    handshake: server.handshake,
    cancel: (reason) => channel.cancel(serverId, reason),
    uri: message.method === 'resources/read' && typeof message.params?.uri === 'string' ? message.params.uri : undefined,
  });
  server.lastUsed = Date.now();
  const requestInfo = requestInfoOf(req);
  const params = message.params;
  // SDK v1 handlers read a retry's answers through inputResponses(extra): remember them, if any.
  if (params && (params.inputResponses !== undefined || params.requestState !== undefined)) rememberParams(requestInfo, params);
  // SEP-2663: a 2025-style `task` hint is ignored (SDK v1 would act on it).
  if (isCall && params && 'task' in params) {
    const { task: _ignored, ...rest } = params;
    message.params = rest;
  }
  const extra = messageExtra(req, requestInfo, server.major === 'v2', noPolling, noPolling);
  const toTask = { request: message, extra, envelope, req };
  if (declared) extra.closeSSEStream = (retryMs) => tasks.start(exchange, server, serverId, toTask, retryMs ?? ctx.options.retryMs);
  serverId = channel.request(message, extra, exchange);
  if (declared && mode !== undefined) tasks.start(exchange, server, serverId, toTask, ctx.options.retryMs);
  res.onClose?.(() => exchange.clientLeft());
}

const noPolling = (): boolean => false;

async function listen(
  ctx: EngineContext,
  req: CoreRequest,
  res: CoreResponder,
  { message, envelope }: ModernRequest,
  server: ModernServer,
): Promise<void> {
  const capabilities = server.handshake.capabilities;
  const raw = (message.params as { notifications?: unknown }).notifications;
  const requested = (typeof raw === 'object' && raw !== null ? raw : {}) as Parameters<typeof ListenStreams.honored>[0];
  const wantsTasks = Array.isArray(requested.taskIds);
  if (wantsTasks && ctx.tasks && !declaresTasks(envelope)) return sendRejection(res, tasksRequired('listening to tasks'), message.id);
  if (!ListenStreams.announces(capabilities) && !(wantsTasks && ctx.tasks)) return sendRejection(res, notFound(message.method), message.id);
  const honored = ListenStreams.honored(requested, capabilities, ctx.tasks !== undefined);
  const principal = principalOf(req.authInfo);
  const { auth } = ctx.options;
  // Each task's notifications carry its result at the end: the token needs its tool's scopes, as
  // for tasks/get (auth/). Asked now of the tasks that exist, and of every task again as it is sent.
  if (auth && honored.taskIds?.length) {
    let tools: (string | undefined)[];
    try {
      tools = await toolsOfTasks(ctx, honored.taskIds, principal);
    } catch (error) {
      ctx.options.onError(asError(error, 'task store failed during subscriptions/listen'));
      return sendRejection(res, unavailable('the task store'), message.id);
    }
    const scoped = auth.checkRead(req, tools);
    if (!scoped.ok) return sendRejection(res, scoped, message.id);
  }
  const mayRead = auth ? (tool: string | undefined) => auth.mayRead(req.authInfo, tool) : () => true;
  const { live } = ctx.registry;
  ctx.listeners.open(res, message.id, honored, server.handshake, principal, mayRead, live, ctx.options.maxBufferedBytes);
}

/** The tools of the tasks of `principal` among `taskIds` (another principal's are as unknown as missing ones). */
async function toolsOfTasks(ctx: EngineContext, taskIds: string[], principal: string | undefined): Promise<(string | undefined)[]> {
  const records = await Promise.all(taskIds.slice(0, MAX_LISTENED_TASKS).map((id) => ctx.options.taskStore.get(id)));
  return records.filter((task) => task !== undefined && task.principal === principal).map((task) => task!.tool);
}

/** Tasks of one listen request whose tools are looked up at once; any more are checked as their notifications go out. */
const MAX_LISTENED_TASKS = 100;

function notFound(method: string): Rejection {
  return reject(404, ModernErrorCode.MethodNotFound, `Method not found: ${method} is not part of protocol revision 2026-07-28`);
}
