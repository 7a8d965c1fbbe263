import type { ClusterMessage } from '../ports/cluster.js';
import type { JSONRPCMessage, RequestId } from '../ports/mcp.js';
import { RECORDED_METHODS } from '../session/record.js';
import type { Session } from '../session/session.js';
import { instanceOfTag } from '../session/tags.js';
import { asError } from '../util/errors.js';
import type { EngineContext } from '../engine/context.js';

/**
 * A shared cluster (serverless: no instance reaches another, see `SessionCluster.shared`): each
 * instance that gets a request for a session serves it with its own copy, so a call runs where its
 * POST landed. What the client sends later for that call may land anywhere; these messages go to
 * the copy that runs it, through the cluster: the client's answer to one of the server's requests
 * (its id is tagged with the instance, see `Session.answerTag`), a `notifications/cancelled` for a
 * request not running here, and a new log level or resource subscription, which every copy takes.
 *
 * Returns the messages to serve here, and the posts of those that go elsewhere (answers and
 * cancels: a POST that carried one is answered once it is on its way, 503 if it could not be).
 */
export function routeShared(
  ctx: EngineContext,
  session: Session,
  messages: JSONRPCMessage[],
): { here: JSONRPCMessage[]; posted: Promise<void>[] } {
  const cluster = ctx.options.cluster!;
  const sessionId = session.sessionId as string;
  const here: JSONRPCMessage[] = [];
  const posted: Promise<void>[] = [];
  for (const message of messages) {
    if (!('method' in message)) {
      const to = 'id' in message && !session.server.awaitsAnswer(message.id) ? instanceOfTag(message.id) : undefined;
      if (to === undefined || to === cluster.instanceId) here.push(message);
      else posted.push(cluster.post!(to, { kind: 'answer', sessionId, message }));
      continue;
    }
    if (message.method === 'notifications/cancelled' && !('id' in message)) {
      const requestId = (message.params as { requestId?: RequestId } | undefined)?.requestId;
      if (requestId !== undefined && session.isInFlight(requestId)) here.push(message);
      else posted.push(cluster.post!('*', { kind: 'cancel', sessionId, message }));
      continue;
    }
    if (RECORDED_METHODS.has(message.method) && 'id' in message) {
      // Every copy takes it; this one answers the client (and saves the record).
      const request = { method: message.method, params: message.params as Record<string, unknown> | undefined };
      cluster.post!('*', { kind: 'record', sessionId, request }).catch((error: unknown) =>
        ctx.options.onError(asError(error, 'cluster post (record) failed')),
      );
    }
    here.push(message);
  }
  return { here, posted };
}

/** What another instance of a shared cluster sends this one about a session held here. */
export function receiveShared(ctx: EngineContext, message: ClusterMessage): void {
  const session = ctx.registry.get(message.sessionId);
  if (!session || session.closed) return;
  switch (message.kind) {
    case 'answer': {
      const id = 'id' in message.message ? message.message.id : undefined;
      if (session.server.awaitsAnswer(id)) session.dispatch([message.message], { headers: {} });
      return;
    }
    case 'cancel': {
      const requestId = ('params' in message.message ? (message.message.params as { requestId?: RequestId }) : undefined)?.requestId;
      if (requestId !== undefined && session.isInFlight(requestId)) session.dispatch([message.message], { headers: {} });
      return;
    }
    case 'record':
      session.server.apply(message.request);
      return;
    case 'ended':
      session.terminate(undefined, 'deleted-elsewhere');
  }
}
