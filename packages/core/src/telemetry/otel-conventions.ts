/**
 * Names of what mcp-kit records through OpenTelemetry. Where a semantic convention exists it is
 * followed: MCP (`mcp.*`, `gen_ai.*`; development status, from the GenAI conventions, as in
 * `@opentelemetry/semantic-conventions` 1.45 `incubating`), HTTP and network attributes. The
 * strings are written here rather than imported: the conventions package advises copying
 * incubating names, and the instrumentation then needs nothing but `@opentelemetry/api`.
 * Everything mcp-kit adds is under `mcp_kit.*`.
 */
export const SCOPE = '@mcp-kit/core';

export const ATTR = {
  mcpMethod: 'mcp.method.name',
  mcpSession: 'mcp.session.id',
  toolName: 'gen_ai.tool.name',
  operationName: 'gen_ai.operation.name',
  errorType: 'error.type',
  httpMethod: 'http.request.method',
  httpStatus: 'http.response.status_code',
  protocolName: 'network.protocol.name',
  transport: 'network.transport',
  era: 'mcp_kit.era',
  streamKind: 'mcp_kit.stream.kind',
  closeReason: 'mcp_kit.stream.close_reason',
  retryMs: 'mcp_kit.stream.retry_ms',
  replayedEvents: 'mcp_kit.resume.replayed_events',
  replayedBytes: 'mcp_kit.resume.replayed_bytes',
  awayMs: 'mcp_kit.resume.away_ms',
  sessionState: 'mcp_kit.session.state',
  sessionEnd: 'mcp_kit.session.end_reason',
  store: 'mcp_kit.store',
  storeOperation: 'mcp_kit.store.operation',
  storeImplementation: 'mcp_kit.store.implementation',
  taskStatus: 'mcp_kit.task.status',
} as const;

/** `mcp.server.operation.duration`: the MCP conventions' buckets, in seconds. */
export const OPERATION_BUCKETS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300];
/** Sessions and SSE connections live from seconds to hours. */
export const LIFETIME_BUCKETS = [0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600, 14_400, 86_400];
/** How long clients stay away after a close: around the `retry` hints they are given. */
export const AWAY_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600];
/** Frames replayed per resume. */
export const REPLAY_BUCKETS = [0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 10_000];
/** Store calls: a memory store answers in microseconds, Redis in a millisecond or so. */
export const STORE_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];

/** Methods of both protocol eras: anything else a client sends is recorded as `_OTHER`. */
const METHODS = new Set([
  'initialize',
  'ping',
  'server/discover',
  'tools/list',
  'tools/call',
  'resources/list',
  'resources/templates/list',
  'resources/read',
  'resources/subscribe',
  'resources/unsubscribe',
  'prompts/list',
  'prompts/get',
  'completion/complete',
  'logging/setLevel',
  'subscriptions/listen',
  'tasks/get',
  'tasks/result',
  'tasks/list',
  'tasks/cancel',
  'tasks/input',
  'notifications/initialized',
  'notifications/cancelled',
  'notifications/progress',
  'notifications/roots/list_changed',
]);

export const OTHER = '_OTHER';

/**
 * Keeps attribute values a client chooses (method and tool names) few, so a client cannot grow
 * the number of metric series: known methods as they are, the first `maxTools` tool names seen,
 * and `_OTHER` for the rest.
 */
export class LabelPolicy {
  private readonly tools = new Set<string>();

  constructor(private readonly maxTools: number) {}

  method(name: string): string {
    return METHODS.has(name) ? name : OTHER;
  }

  tool(name: string): string {
    if (this.tools.has(name)) return name;
    if (this.tools.size >= this.maxTools || name.length > 128) return OTHER;
    this.tools.add(name);
    return name;
  }
}
