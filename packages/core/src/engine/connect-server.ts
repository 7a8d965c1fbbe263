import { ErrorCode, errorBody, sendRejection, sessionNotFound } from '../http/errors.js';
import { sdkMajorOf, type ConnectableServer } from '../sdk/connectable-server.js';
import type { CoreResponder } from '../ports/http.js';
import { JSON_HEADERS } from '../streams/frames.js';
import type { Session } from '../session/session.js';
import { asError } from '../util/errors.js';
import type { EngineContext } from './context.js';

/**
 * Connects a new server from the user's factory to a new session; a factory that throws is the
 * application's bug, so the client gets a 500 and `onError` the cause.
 */
export async function connectServer(ctx: EngineContext, session: Session, res: CoreResponder): Promise<boolean> {
  try {
    await newServer(ctx, session, false);
    return true;
  } catch (error) {
    session.terminate(undefined, 'error');
    ctx.options.onError(asError(error, 'server factory failed'));
    res.send(500, JSON_HEADERS, errorBody(ErrorCode.InternalError, 'Internal error: could not create the MCP server'));
    return false;
  }
}

/**
 * A hibernated session gets a new server, brought up to date, before its request goes in (and a
 * session that never had one, its first: see `lazyServers`). If that fails the session cannot go
 * on: it ends (500 now, 404 next, and the client re-initializes).
 */
export async function wake(ctx: EngineContext, session: Session, res: CoreResponder): Promise<boolean> {
  const started = Date.now();
  const restoring = !session.server.deferred;
  try {
    await session.server.wake(() => newServer(ctx, session, restoring));
    const { telemetry } = ctx.options;
    // A session's first server (see `lazyServers`) is no wake.
    if (telemetry.on && restoring) telemetry.sessionEvent('session.wake', session.sessionId as string, { ms: Date.now() - started });
  } catch (error) {
    session.terminate(undefined, 'error');
    ctx.options.onError(asError(error, 'restoring a hibernated session failed'));
    res.send(500, JSON_HEADERS, errorBody(ErrorCode.InternalError, 'Internal error: could not restore the MCP server of this session'));
    return false;
  }
  if (!session.closed) return true;
  sendRejection(res, sessionNotFound());
  return false;
}

async function newServer(ctx: EngineContext, session: Session, restoring: boolean): Promise<void> {
  const server: ConnectableServer = await ctx.options.server({ era: 'legacy', sessionId: session.sessionId, restoring });
  if (!server || typeof (server as { connect?: unknown }).connect !== 'function') {
    throw new TypeError('createMcpHandler: the `server` factory must return an McpServer (or SDK Server) with connect()');
  }
  session.server.attach(server, sdkMajorOf(server));
  await server.connect(session as never);
}
