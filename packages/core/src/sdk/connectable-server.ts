/**
 * The servers of both SDK majors, as the engine sees them: something with `connect(transport)`
 * and `close()`, whose major decides a few things the engine must do for it.
 */

/** An SDK v1 or v2 `McpServer` or low-level `Server`: anything with `connect(transport)`. */
export interface ConnectableServer {
  // `never`: accepts either major's Transport parameter (a function of a narrower parameter type
  // is assignable here), so neither SDK's types need to be installed to type-check.
  connect(transport: never): Promise<void>;
  close(): Promise<void>;
}

export type SdkMajor = 'v1' | 'v2';

interface LowLevelServer {
  getNegotiatedProtocolVersion?: unknown;
  _negotiatedProtocolVersion?: string | undefined;
}

/** The low-level `Server` of an `McpServer` (both majors keep it in `.server`), or the server itself. */
function lowLevel(server: ConnectableServer): LowLevelServer {
  const inner = (server as { server?: unknown }).server;
  return (
    typeof inner === 'object' && inner !== null && typeof (inner as { connect?: unknown }).connect === 'function' ? inner : server
  ) as LowLevelServer;
}

/** SDK v2's low-level `Server` has `getNegotiatedProtocolVersion()`; v1 (1.x) has no such method. */
export function sdkMajorOf(server: ConnectableServer): SdkMajor {
  return typeof lowLevel(server).getNegotiatedProtocolVersion === 'function' ? 'v2' : 'v1';
}

/**
 * Makes a v2 server that has just completed a handshake serve the 2026-07-28 era on the
 * transport it is connected to: its encode seam then stamps `resultType`, cache hints and
 * `serverInfo`, reads the envelope per request, and offers `inputRequired` results. SDK v2.4's own
 * entries do exactly this write (`setNegotiatedProtocolVersion` in core-internal's protocol.ts),
 * but keep the function internal; a transport that is not its per-request one gets no other way
 * in. The handshake before it seeds what the deprecated accessors (`getClientCapabilities()`) read.
 */
export function bindModernEra(server: ConnectableServer, version: string): void {
  const low = lowLevel(server);
  if (!('_negotiatedProtocolVersion' in low)) {
    throw new Error(
      'mcp-kit: this SDK v2 server has no negotiated protocol version field; mcp-kit supports @modelcontextprotocol/server 2.4 and later 2.x',
    );
  }
  low._negotiatedProtocolVersion = version;
}
