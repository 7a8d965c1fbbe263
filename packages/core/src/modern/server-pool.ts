import type { JSONRPCMessage } from '../ports/mcp.js';
import type { ResolvedOptions } from '../options.js';
import { bindModernEra, sdkMajorOf, type ConnectableServer, type SdkMajor } from '../sdk/connectable-server.js';
import { asError } from '../util/errors.js';
import { ModernChannel, type Reply } from './channel.js';
import type { Envelope } from './envelope.js';
import { paramHeadersOf, type ParamHeader } from './param-headers.js';

/** The server refused the `initialize` made from a request's envelope: what the client declares does not fit it. */
export class HandshakeRefused extends Error {
  constructor(reason: string) {
    super(`the server refused the handshake: ${reason}`);
    this.name = 'HandshakeRefused';
  }
}

/** What the server said about itself in the handshake: what `server/discover` answers. */
export interface Handshake {
  capabilities: Record<string, unknown>;
  serverInfo: { name: string; version: string; [key: string]: unknown };
  instructions?: string;
}

/** How a tool asks to run as a task (see {@link taskTool}). */
export type TaskMode = 'required' | 'preferred';

/** One server serving 2026-era requests of one principal's clients that declare the same capabilities. */
export interface ModernServer {
  readonly key: string;
  /** Whose requests it serves (`undefined` without auth): what it keeps between them is theirs only. */
  readonly principal: string | undefined;
  readonly major: SdkMajor;
  readonly channel: ModernChannel;
  readonly handshake: Handshake;
  /** What mcp-kit must know of the server's tools (read again when they change). */
  tools: ToolFacts;
  lastUsed: number;
}

/** The version the handshake speaks: both majors know it, and neither negotiates a 2026 one through initialize. */
const HANDSHAKE_VERSION = '2025-11-25';

/**
 * The servers behind the 2026 era. There are no sessions, but both SDK majors keep what a client
 * declared (capabilities, client info) on the server instance, from a handshake. So a server is
 * built per distinct client kind, handshaken once with what the envelope declares, and then
 * serves every request of clients that declare the same, concurrently, as a 2025 session's server
 * serves that session. A handful of client kinds means a handful of servers, not one per request.
 * With `auth`, a server serves one principal only: whatever a server factory or its tools keep on
 * the server between requests (a cache, a counter, a dynamically registered tool) is seen by the
 * requests of the principal it was built for, as a 2025 session's server is its principal's alone.
 * Idle servers past `maxModernServers` are closed, least recently used first.
 */
export class ModernServers {
  private readonly servers = new Map<string, Promise<ModernServer>>();

  constructor(
    private readonly options: ResolvedOptions,
    /** Where a server's messages that belong to no request go: the listen streams of its principal. */
    private readonly broadcast: (message: JSONRPCMessage, principal: string | undefined) => void,
    /** Told each time a request in flight on a server is answered or cancelled (a drain waits for them). */
    private readonly settled?: () => void,
  ) {}

  /** The server for `principal`'s requests that carry `envelope`, built and handshaken on first use. */
  acquire(envelope: Envelope, principal: string | undefined): Promise<ModernServer> {
    const key = identityKey(envelope, principal);
    let entry = this.servers.get(key);
    if (entry === undefined) {
      entry = this.build(key, envelope, principal).then((server) => {
        this.ready.set(key, server);
        return server;
      });
      this.servers.set(key, entry);
      // A server that could not be built is not kept: the next request tries again.
      entry.catch(() => this.servers.delete(key));
      this.trim();
    }
    return entry;
  }

  /** Closes every server (shutdown). */
  async close(): Promise<void> {
    const all = [...this.servers.values()];
    this.servers.clear();
    this.ready.clear();
    await Promise.all(
      all.map((entry) =>
        entry.then(
          (s) => s.channel.close(),
          () => undefined,
        ),
      ),
    );
  }

  get size(): number {
    return this.servers.size;
  }

  /** 2026 requests being answered now, on every server. */
  get inFlight(): number {
    let n = 0;
    for (const server of this.ready.values()) n += server.channel.inFlight;
    return n;
  }

  private async build(key: string, envelope: Envelope, principal: string | undefined): Promise<ModernServer> {
    const server: ConnectableServer = await this.options.server({ sessionId: undefined, restoring: false, era: 'modern' });
    if (!server || typeof (server as { connect?: unknown }).connect !== 'function') {
      throw new TypeError('createMcpHandler: the `server` factory must return an McpServer (or SDK Server) with connect()');
    }
    const holder: { built?: ModernServer } = {};
    const broadcast = (message: JSONRPCMessage) => {
      // The tools changed: their task marks and parameter headers may have too.
      const built = holder.built;
      if (built && 'method' in message && message.method === 'notifications/tools/list_changed') {
        void listTools(built.channel).then(
          (tools) => (built.tools = tools),
          () => undefined,
        );
      }
      this.broadcast(message, principal);
    };
    const channel = new ModernChannel(broadcast, (id, method) => refuseServerRequest(channel, id, method));
    channel.onSettled = this.settled;
    channel.onclose = () =>
      void server.close().catch((error: unknown) => this.options.onError(asError(error, 'closing a 2026-era server failed')));
    await server.connect(channel as never);
    const major = sdkMajorOf(server);
    const handshake = await handshakeWith(channel, envelope).catch(async (error: unknown) => {
      // Nothing will use this server: let it go before saying why.
      await channel.close();
      throw error;
    });
    const tools = handshake.capabilities.tools ? await listTools(channel) : { taskModes: new Map(), paramHeaders: new Map() };
    if (major === 'v2') bindModernEra(server, envelope.protocolVersion);
    holder.built = { key, principal, major, channel, handshake, tools, lastUsed: Date.now() };
    return holder.built;
  }

  /** Keeps at most `maxModernServers`, closing the least recently used ones (a request sets `lastUsed`). */
  private trim(): void {
    if (this.servers.size <= this.options.maxModernServers) return;
    const built = [...this.ready.values()].sort((a, b) => a.lastUsed - b.lastUsed);
    for (const server of built.slice(0, this.servers.size - this.options.maxModernServers)) {
      this.servers.delete(server.key);
      this.ready.delete(server.key);
      // A server with requests in flight finishes them; it closes once they are answered.
      closeWhenIdle(server.channel);
    }
  }

  /** The servers whose handshake is done, by key. */
  private readonly ready = new Map<string, ModernServer>();
}

/**
 * What makes one server unfit for another client: its principal (see {@link ModernServers}), and
 * its declared capabilities (what the server may ask of it, which extensions it speaks). Not
 * `clientInfo`: a client that rotates its version would get a server per request and push
 * everyone else's out. A tool reads the client of a request from the request's `_meta`; the
 * server's own idea of its client is the first one of that kind.
 */
function identityKey(envelope: Envelope, principal: string | undefined): string {
  return `${principal ?? ''}\u0000${JSON.stringify(envelope.clientCapabilities ?? null)}`;
}

function closeWhenIdle(channel: ModernChannel): void {
  if (channel.inFlight === 0) return void channel.close();
  const timer = setInterval(() => {
    if (channel.inFlight > 0) return;
    clearInterval(timer);
    void channel.close();
  }, 1_000);
  timer.unref?.();
}

/**
 * What both majors need to know a client: an `initialize` with what the envelope declares, and
 * `notifications/initialized`. Its answer is what `server/discover` tells 2026 clients.
 */
function handshakeWith(channel: ModernChannel, envelope: Envelope): Promise<Handshake> {
  return new Promise((resolve, reject) => {
    const reply: Reply = {
      answer(message) {
        const error = (message as { error?: { message?: string } }).error;
        if (error) return reject(new HandshakeRefused(error.message ?? 'no reason given'));
        const result = (message as unknown as { result: Handshake }).result;
        channel.deliver({ jsonrpc: '2.0', method: 'notifications/initialized' });
        resolve({ capabilities: result.capabilities ?? {}, serverInfo: result.serverInfo, instructions: result.instructions });
      },
      related() {},
    };
    const clientInfo = envelope.clientInfo ?? { name: 'mcp-kit-2026-client', version: '0.0.0' };
    channel.request(
      {
        jsonrpc: '2.0',
        id: 0,
        method: 'initialize',
        params: { protocolVersion: HANDSHAKE_VERSION, capabilities: envelope.clientCapabilities, clientInfo },
      },
      {},
      reply,
    );
  });
}

/** The `_meta` key a tool definition carries to run as a task (see {@link taskTool}). */
export const TASK_META_KEY = 'mcp-kit/task';

/**
 * Marks a tool to run as a task (Tasks extension) for every 2026-07-28 client that declares the
 * extension, from its first instruction: put it in the tool's `_meta`. `'required'`: a client
 * without the extension gets -32021 and the tool does not run. `'preferred'`: such a client gets
 * the result on its stream. (A tool can also decide as it runs, with `closeSSEStream`.)
 *
 * @example
 * ```ts source="../../examples/core.examples.ts#taskTool"
 * server.registerTool('export_archive', { _meta: taskTool('required') }, async (extra) => {
 *   const url = await buildArchive(extra.signal); // the client polls tasks/get meanwhile
 *   return { content: [{ type: 'text', text: url }] };
 * });
 * ```
 */
export function taskTool(mode: TaskMode): { [TASK_META_KEY]: TaskMode } {
  return { [TASK_META_KEY]: mode };
}

/** What mcp-kit reads off the server's tools: which run as tasks, which arguments travel as headers too. */
export interface ToolFacts {
  taskModes: Map<string, TaskMode>;
  paramHeaders: Map<string, ParamHeader[]>;
}

/** Reads the tools' facts through all pages of the server's tools/list. */
async function listTools(channel: ModernChannel): Promise<ToolFacts> {
  const facts: ToolFacts = { taskModes: new Map(), paramHeaders: new Map() };
  let cursor: string | undefined;
  for (let page = 0; page < 100; page++) {
    const result = await ask(channel, 'tools/list', cursor === undefined ? {} : { cursor });
    for (const tool of (result.tools ?? []) as Array<{ name: string; inputSchema?: unknown; _meta?: Record<string, unknown> }>) {
      const mode = tool._meta?.[TASK_META_KEY];
      if (mode === 'required' || mode === 'preferred') facts.taskModes.set(tool.name, mode);
      const headers = paramHeadersOf(tool.inputSchema);
      if (headers.length > 0) facts.paramHeaders.set(tool.name, headers);
    }
    cursor = typeof result.nextCursor === 'string' ? result.nextCursor : undefined;
    if (cursor === undefined) break;
  }
  return facts;
}

/** A request of mcp-kit's own to the server, answered through the channel. */
function ask(channel: ModernChannel, method: string, params: Record<string, unknown>): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    channel.request(
      { jsonrpc: '2.0', id: 0, method, params },
      {},
      {
        answer(message) {
          const { result, error } = message as { result?: Record<string, unknown>; error?: { message: string } };
          if (error) reject(new Error(`${method}: ${error.message}`));
          else resolve(result ?? {});
        },
        related() {},
      },
    );
  });
}

/**
 * A 2026 client cannot be asked anything mid-call (input comes through `input_required` results
 * or tasks): the server's own request is answered with an error at once, instead of waiting for
 * an answer that cannot come.
 */
function refuseServerRequest(channel: ModernChannel, id: string | number, method: string): void {
  channel.deliver({
    jsonrpc: '2.0',
    id,
    error: {
      code: -32601,
      message: `${method} cannot reach a client of the 2026-07-28 era during a request; return an input_required result or run the tool as a task`,
    },
  });
}
