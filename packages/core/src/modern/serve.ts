import type { JSONRPCRequest } from '../ports/mcp.js';
import { ErrorCode, reject, sendRejection, type Rejection } from '../http/errors.js';
import { parseMessages } from '../http/messages.js';
import type { CoreRequest, CoreResponder } from '../ports/http.js';
import { messageExtra, requestInfoOf } from '../sdk/extra.js';
import { rememberParams } from '../sdk/input.js';
import { JSON_HEADERS } from '../streams/frames.js';
import { asError } from '../util/errors.js';
import type { EngineContext } from '../engine/context.js';
import { discoverResult } from './discover.js';
import { checkModernVersion, checkRoutingHeaders, ModernErrorCode, readEnvelope, type Envelope } from './envelope.js';
import { Exchange } from './exchange.js';
import { ListenStreams } from './listen.js';
import type { ModernServer } from './servers.js';

/** Methods the 2026-07-28 revision removed: a server of that era does not have them (404, -32601). */
const REMOVED = new Set(['initialize', 'ping', 'logging/setLevel', 'resources/subscribe', 'resources/unsubscribe']);

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
  if ('ok' in checked) return sendRejection(res, checked, idOf(body));
  const { message, envelope } = checked;
  // A notification of this era has nothing to answer (cancellation is a closed stream on HTTP).
  if (!('id' in message)) return res.send(202, {}, undefined);
  const id = message.id;
  if (REMOVED.has(message.method)) return sendRejection(res, notFound(message.method), id);
  let server: ModernServer;
  try {
    server = await ctx.modern.acquire(envelope);
  } catch (error) {
    ctx.options.onError(asError(error, 'building a server for a 2026-era request failed'));
    return sendRejection(res, reject(500, ErrorCode.InternalError, 'Internal error: could not create the MCP server'), id);
  }
  if (message.method === 'server/discover') return reply(res, id, discoverResult(server.handshake, ctx.extensions));
  if (message.method === 'subscriptions/listen') return listen(ctx, res, message, server);
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

/** Hands the request to the server, which answers through an {@link Exchange}. */
function dispatch(
  ctx: EngineContext,
  req: CoreRequest,
  res: CoreResponder,
  { message, envelope }: ModernRequest,
  server: ModernServer,
): void {
  const channel = server.channel;
  let serverId = 0;
  const exchange = new Exchange(message.id, message.method, envelope, {
    res,
    live: ctx.registry.live,
    maxBufferedBytes: ctx.options.maxBufferedBytes,
    handshake: server.handshake,
    cancel: (reason) => channel.cancel(serverId, reason),
  });
  server.lastUsed = Date.now();
  // SEP-1699 polling does not exist in this era (a closed stream cancels its request).
  const requestInfo = requestInfoOf(req);
  rememberParams(requestInfo, message.params);
  const extra = messageExtra(req, requestInfo, server.major === 'v2', noPolling, noPolling);
  serverId = channel.request(message, extra, exchange);
  res.onClose?.(() => exchange.clientLeft());
}

const noPolling = (): boolean => false;

function listen(ctx: EngineContext, res: CoreResponder, message: JSONRPCRequest, server: ModernServer): void {
  const capabilities = server.handshake.capabilities;
  if (!ListenStreams.announces(capabilities)) return sendRejection(res, notFound(message.method), message.id);
  const requested = ((message.params as { notifications?: unknown }).notifications ?? {}) as Parameters<typeof ListenStreams.honored>[0];
  const honored = ListenStreams.honored(typeof requested === 'object' && requested !== null ? requested : {}, capabilities);
  ctx.listeners.open(res, message.id, honored, server.handshake, ctx.registry.live, ctx.options.maxBufferedBytes);
}

function reply(res: CoreResponder, id: string | number, result: Record<string, unknown>): void {
  res.send(200, JSON_HEADERS, JSON.stringify({ jsonrpc: '2.0', id, result }));
}

function notFound(method: string): Rejection {
  return reject(404, ModernErrorCode.MethodNotFound, `Method not found: ${method} is not part of protocol revision 2026-07-28`);
}

/** The request's id, when the body has a readable one: an error answer echoes it. */
function idOf(body: unknown): string | number | undefined {
  const id = (body as { id?: unknown } | null)?.id;
  return typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id)) ? id : undefined;
}
