import type { MetadataRequest, MetadataResponse, ProtectedResourceMetadata } from './auth/metadata.js';
import { ClusterLayer } from './cluster/layer.js';
import { EngineContext } from './engine/context.js';
import { serveDelete } from './engine/delete.js';
import { serveGet } from './engine/get.js';
import { servePost } from './engine/post.js';
import { ErrorCode, reject, sendRejection } from './http/errors.js';
import { checkHostAndOrigin, checkHostSyntax, checkMethod, header, isLoopbackAddress } from './http/rules.js';
import { resolveOptions, type McpHandlerOptions, type ResolvedOptions } from './options.js';
import type { CoreRequest, CoreResponder } from './ports/http.js';
import type { EngineListener } from './telemetry/hub.js';
import { observeRequest } from './telemetry/request.js';

/**
 * The framework-neutral MCP endpoint. Adapters turn framework requests into {@link CoreRequest}s
 * and call {@link McpHandler.handle}; create one with {@link createMcpHandler}.
 */
export class McpHandler {
  readonly options: Readonly<ResolvedOptions>;
  private readonly ctx: EngineContext;

  constructor(options: McpHandlerOptions) {
    this.ctx = new EngineContext(resolveOptions(options));
    // The cluster layer sits above the engine, which reaches it only through its port.
    if (this.ctx.options.cluster) this.ctx.cluster = new ClusterLayer(this.ctx);
    this.options = this.ctx.options;
  }

  /**
   * Serves one HTTP request: checks what every request must pass (method, Host and Origin), then
   * hands it to the verb's module. Resolves once the response has started (streams go on after).
   */
  handle(req: CoreRequest, res: CoreResponder): Promise<void> {
    const { telemetry } = this.ctx.options;
    // Only while somebody listens: the answer's status and time are recorded (see telemetry/).
    if (telemetry.on) return observeRequest(this.ctx, req, res, (r) => this.serve(req, r));
    return this.serve(req, res);
  }

  /**
   * Subscribes to what the engine does (sessions, streams, resumes, tasks, requests; see
   * `EngineEvent`): for a live page, logs or tests. Returns the unsubscribe function. Session and
   * stream ids come as non-reversible hashes.
   */
  observe(listener: EngineListener): () => void {
    return this.ctx.options.telemetry.subscribe(listener);
  }

  private async serve(req: CoreRequest, res: CoreResponder): Promise<void> {
    const ctx = this.ctx;
    // After a drain, close() refuses only once nothing can be handed over any more.
    if (ctx.drain.refusesAll) {
      const retryAfter = String(Math.max(1, Math.ceil(ctx.options.retryMs / 1000)));
      return sendRejection(
        res,
        reject(503, ErrorCode.ServerError, 'Service Unavailable: the server is shutting down; retry later', { 'retry-after': retryAfter }),
      );
    }
    const method = req.method.toUpperCase();
    const allowed = checkMethod(method, ctx.options.stateless || !ctx.options.eras.legacy);
    if (!allowed.ok) return sendRejection(res, allowed);
    // RFC 9112 §3.2: a Host that is no host[:port] is the request's fault, whatever reads it later.
    const host = checkHostSyntax(header(req.headers, 'host'));
    if (!host.ok) return sendRejection(res, host);
    const { dnsRebindingProtection } = ctx.options;
    if (dnsRebindingProtection === true || (dnsRebindingProtection === 'auto' && isLoopbackAddress(req.localAddress))) {
      const v = checkHostAndOrigin(header(req.headers, 'host'), header(req.headers, 'origin'), ctx.options);
      if (!v.ok) return sendRejection(res, v);
    }
    // Nothing is read, looked up or created for a request without a valid token (auth/).
    if (ctx.options.auth) {
      const v = await ctx.options.auth.authenticate(req);
      if (!v.ok) return sendRejection(res, v);
    }
    if (method === 'POST') return servePost(ctx, req, res);
    if (method === 'GET') return serveGet(ctx, req, res);
    return serveDelete(ctx, req, res);
  }

  /**
   * Hands this instance's work to the others before it stops (a rolling deploy's `SIGTERM`): new
   * sessions and calls go to other instances at once (requests that still reach this one are
   * handed over to a live peer); sessions move as soon as they are idle (their clients see nothing
   * but the answers); calls running here go on until they finish or `deadlineMs` passes, while
   * their clients follow them from other instances. A question a running call asked its client
   * still gets its answer. Resolves once nothing is left here; the instance keeps handing requests
   * over until you close your HTTP server and call {@link close}. Without a `cluster`, new sessions
   * get 503 and the running calls are waited for. Default deadline `30_000` ms.
   *
   * @example
   * ```ts source="../examples/core.examples.ts#drain"
   * // On SIGTERM: drain, stop listening, close, exit. `shutdownGracefully` from `@mcp-kit/core/node`
   * // does it in one call (with Connection: close on every answer and a grace for open connections).
   * process.on('SIGTERM', async () => {
   *   await mcp.drain({ deadlineMs: 25_000 }); // work moves to the other instances
   *   httpServer.close(async () => {
   *     await mcp.close(); // then this instance lets go of its place in the cluster
   *     process.exit(0);
   *   });
   * });
   * ```
   */
  drain(options: { deadlineMs?: number } = {}): Promise<void> {
    const deadlineMs = options.deadlineMs ?? 30_000;
    if (!Number.isInteger(deadlineMs) || deadlineMs < 0)
      throw new RangeError(`drain: deadlineMs must be a non-negative integer, got ${String(deadlineMs)}`);
    return this.ctx.drain.start(this.ctx, deadlineMs);
  }

  /** Graceful shutdown: ends every stream with the retry hint, closes every session and the store. */
  async close(): Promise<void> {
    const ctx = this.ctx;
    ctx.drain.close();
    ctx.registry.close(ctx.options.retryMs);
    ctx.listeners.close();
    ctx.tasks?.close();
    await ctx.modern.close();
    await ctx.cluster?.leave(ctx.options.retryMs);
    ctx.drain.leftCluster();
    await ctx.options.cluster?.directory.close?.();
    await ctx.options.eventStore.close?.();
    await ctx.options.taskStore.close?.();
  }

  /**
   * The Protected Resource Metadata (RFC 9728) of this endpoint for a request (its `Host` picks
   * one of several configured resources; the loopback default needs where it arrived), or
   * `undefined` when the request has no resource here. `mcpPath` (default `/mcp`) is the MCP
   * endpoint's path for the loopback default. Needs the `auth` option. The adapters serve it; this
   * is for anyone else.
   */
  protectedResourceMetadata(request: MetadataRequest, mcpPath?: string): ProtectedResourceMetadata | undefined {
    return this.resourceServer('protectedResourceMetadata').metadataDocument(request, mcpPath);
  }

  /**
   * For adapters: the HTTP answer to a request for the metadata (`GET`, `HEAD`, `OPTIONS`), or
   * `undefined` when the request is for none of this endpoint's metadata URLs (or `auth` is not
   * set), so it goes on to the application. `nodeMetadataRequest(req)` and
   * `webMetadataRequest(request, listener)` make the request. `mcpPath`: the MCP endpoint's path
   * when the adapter knows it; otherwise any path after the well-known one is taken for it.
   */
  authMetadataResponse(request: MetadataRequest, mcpPath?: string): MetadataResponse | undefined {
    return this.ctx.options.auth?.metadataResponse(request, mcpPath);
  }

  private resourceServer(caller: string): NonNullable<ResolvedOptions['auth']> {
    const auth = this.ctx.options.auth;
    if (!auth) throw new TypeError(`McpHandler.${caller}: the handler has no \`auth\` option`);
    return auth;
  }

  /** Open sessions. */
  get sessionCount(): number {
    return this.ctx.registry.size;
  }

  /** Open sessions whose server is let go until their next POST (see `hibernateAfterMs`). */
  get hibernatedSessionCount(): number {
    return this.ctx.registry.hibernatedCount;
  }
}

/**
 * Creates the engine that serves MCP over Streamable HTTP with SEP-1699 polling. Mount it with
 * `mcpExpress(handler)`, `mcpKoa(handler)`, `mcpNext(handler)` or `toFetchHandler(handler)`.
 *
 * @example
 * ```ts source="../examples/core.examples.ts#createMcpHandler"
 * const mcp = createMcpHandler({ server: () => buildServer(), retryMs: 2_000 });
 * app.use('/mcp', mcpExpress(mcp));
 * ```
 */
export function createMcpHandler(options: McpHandlerOptions): McpHandler {
  return new McpHandler(options);
}
