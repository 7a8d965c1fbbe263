// The public API of @mcp-kit/core: what a semver promise covers. Tests and the benchmark reach
// further through `@mcp-kit/core/internal`, which promises nothing.
export { createMcpHandler, McpHandler } from './handler.js';
export type { McpHandlerOptions, ServerFactoryContext, ConnectableServer, ProtocolEra } from './options.js';
export { closeSSEStream, closeStandaloneSSEStream } from './streams/close.js';
// OAuth 2.1 resource server (the `auth` option): token verifiers, and the metadata adapters serve.
export type { AuthOptions, TokenVerifier, VerifyContext } from './auth/options.js';
export { jwtVerifier } from './auth/jwt.js';
export type { JwtVerifierOptions } from './auth/jwt.js';
export { introspectionVerifier } from './auth/introspection.js';
export type { IntrospectionVerifierOptions } from './auth/introspection.js';
export { InvalidTokenError, InsufficientScopeError } from './auth/errors.js';
export { METADATA_PATH } from './auth/metadata.js';
export type { ProtectedResourceMetadata, MetadataResponse, MetadataRequest } from './auth/metadata.js';
export type { SSEStreamControls } from './streams/close.js';
export { inputResponses, requestState } from './sdk/input.js';
export type { InputContext } from './sdk/input.js';
export { MemoryEventStore } from './events/memory.js';
export { MemoryTaskStore, TaskStoreFullError } from './tasks/memory-store.js';
export type { MemoryTaskStoreOptions } from './tasks/memory-store.js';
export { taskTool, TASK_META_KEY } from './modern/server-pool.js';
export { protocolError, ERROR_META_KEY } from './modern/results.js';
export type { TaskMode } from './modern/server-pool.js';
export type { MemoryEventStoreOptions } from './events/memory.js';
export { handleNodeRequest, nodeMetadataRequest } from './bridges/node/index.js';
export type { NodeRequestOptions } from './bridges/node/index.js';
export { toFetchHandler, webMetadataRequest } from './bridges/web/index.js';
export type { FetchHandler, FetchHandlerOptions, FetchCallContext } from './bridges/web/index.js';
// Ports: for custom event stores, clusters and adapters.
export type {
  EventStore,
  StreamKey,
  ReplayResult,
  StreamListener,
  StreamSubscription,
  StreamWriter,
  UnfinishedStream,
} from './ports/event-store.js';
export { StreamGap, StreamTakenOver } from './ports/event-store.js';
export type { TaskStore, TaskRecord, TaskStatus, TaskChange, TaskSignalListener, InputRequest } from './ports/task-store.js';
export { TERMINAL_STATUSES } from './ports/task-store.js';
export type { SessionCluster, SessionDirectory } from './ports/cluster.js';
export type { RestoreRecord, Restored } from './ports/record.js';
export { FORWARDED_HEADER, HANDED_OVER_HEADER, MOVED_HEADER } from './ports/hops.js';
export type { SessionOwners, SessionOwner, ForwardedRequest, TakeOver } from './ports/owners.js';
export type { SessionCopies, ClusterMessage } from './ports/copies.js';
export type { CoreRequest, CoreResponder, SseSink, BodyText, OutHeaders, HeaderMap, GetAuthInfo } from './ports/http.js';
export type { AuthInfo } from './ports/mcp.js';
// What `McpHandler.observe` reports; `@mcp-kit/core/otel` turns it into OpenTelemetry metrics and spans.
export type {
  EngineEvent,
  RequestEvent,
  StreamKind,
  StreamOpenEvent,
  StreamCloseEvent,
  CloseReason,
  SessionEndReason,
} from './telemetry/events.js';
export type { EngineListener } from './telemetry/hub.js';
