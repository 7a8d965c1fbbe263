// Internals for mcp-kit's own packages, tests and benchmark. Not covered by semver: anything here
// may change in any release. Applications import from `@mcp-kit/core`.
export { eventId, parseEventId, randomId } from './events/ids.js';
export { NodeResponder } from './bridges/node/response.js';
export {
  checkAccept,
  checkContentType,
  checkHostAndOrigin,
  checkMethod,
  checkProtocolVersion,
  header,
  hostName,
  isLoopbackAddress,
  LOCAL_HOSTS,
  principalOf,
} from './http/rules.js';
export type { HostCheck } from './http/rules.js';
export { parseMessages, allowsBatches } from './http/messages.js';
export type { ParsedBody } from './http/messages.js';
export { ErrorCode, errorBody, reject } from './http/errors.js';
export type { Verdict, Rejection } from './http/errors.js';
export { primingEvent, messageEvent, retryField, SSE_HEADERS, JSON_HEADERS } from './streams/frames.js';
export { resolveOptions } from './options.js';
export type { ResolvedOptions } from './options.js';
export { asError, settle } from './util/errors.js';
export { positiveInt, nonNegativeInt } from './util/numbers.js';
export { pauseBefore, REDIS_RECONNECT_MS } from './util/retry.js';
export { retainedBy } from './retained.js';
export type { Retained } from './retained.js';
