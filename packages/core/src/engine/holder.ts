import { principalOf } from '../http/rules.js';
import type { CoreRequest } from '../ports/http.js';
import { asError } from '../util/errors.js';
import type { EngineContext } from './context.js';

/**
 * Whom the per-principal caps count a request's sessions for: its principal, or without auth the
 * `clientKey` option's answer (`client:<key>`); `undefined` when neither is known (uncounted).
 */
export function holderOf(ctx: EngineContext, req: CoreRequest): string | undefined {
  const principal = principalOf(req.authInfo);
  if (principal !== undefined) return principal;
  try {
    const key = ctx.options.clientKey({ headers: req.headers, remoteAddress: req.remoteAddress });
    return typeof key === 'string' && key !== '' ? `client:${key}` : undefined;
  } catch (error) {
    ctx.options.onError(asError(error, 'clientKey failed'));
    return undefined;
  }
}
