import { ErrorCode, reject, sendRejection } from '../http/errors.js';
import type { SessionOwner } from '../ports/cluster.js';
import type { CoreRequest, CoreResponder } from '../ports/http.js';
import { asError } from '../util/errors.js';
import type { EngineContext } from '../engine/context.js';

/** Serves a request for another instance's session on that instance, relaying its answer as it comes. */
export async function forward(
  ctx: EngineContext,
  req: CoreRequest,
  res: CoreResponder,
  owner: SessionOwner,
  body: string | undefined,
): Promise<void> {
  const request = { method: req.method.toUpperCase(), headers: req.headers, body, url: req.url };
  try {
    await ctx.options.cluster!.forward(owner, request, res);
  } catch (error) {
    ctx.options.onError(asError(error, `forwarding to instance ${owner.instanceId} failed`));
    sendRejection(
      res,
      reject(502, ErrorCode.ServerError, 'Bad Gateway: the server instance that owns this session did not answer; retry later', {
        'retry-after': '1',
      }),
    );
  }
}
