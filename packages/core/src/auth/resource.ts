import { ErrorCode, reject, type Rejection } from '../http/errors.js';
import { isLoopbackAddress, parseHost } from '../http/rules.js';
import { metadataUrlOf } from './metadata.js';

/**
 * Where a request arrived, as the server knows it. `host` is the client's `Host` header, untrusted:
 * it only picks one of the resources configuration names. The rest comes from the listening
 * socket (the node bridge reads it; a fetch handler is told it): no header can change it.
 */
export interface Arrival {
  host: string | undefined;
  /** The listener's address the request reached (`127.0.0.1`, `::1`, a public address). */
  localAddress: string | undefined;
  /** The listener's port. */
  localPort: number | undefined;
  /** The connection is TLS (the socket itself, never `X-Forwarded-Proto`). */
  tls: boolean | undefined;
}

/** A resource identifier this server accepts tokens for (RFC 8707), and where its metadata is (RFC 9728). */
export interface Resource {
  /** What a token's audience must be, character for character. */
  resource: string;
  metadataUrl: string;
  /** The MCP endpoint's path in it (`/mcp`), for the metadata's path-suffixed URL. */
  path: string;
}

/** A configured resource, with the authority a `Host` header is compared with. */
interface Configured extends Resource {
  hostname: string;
  /** The port, or `undefined` when the URL names none (its scheme's default: what a Host without a port names). */
  port: number | undefined;
  /** Its scheme's port (a Host may name it explicitly). */
  defaultPort: number;
}

/** Resources of the loopback default seen lately, by what made them (a handful: one per loopback name and path). */
const MAX_REMEMBERED = 64;

/**
 * Which resource a request is for: configuration decides, never the request. One configured
 * resource is the resource of every request, whatever its headers. Several (a deployment with
 * several public names) are told apart by the `Host` header, compared with each one's host and
 * port: a Host that names none of them is refused. Without configuration, only a request that
 * reached a loopback listener has one: `http://<loopback name of Host>:<listening port>/<path>`,
 * where the Host's port must be the listening port. A resource made of the request's own headers
 * would undo the audience check (RFC 8707's confused deputy): another server a victim gave a token
 * to could replay it here with its own name in `Host` or `X-Forwarded-Host`, and the audience
 * would match.
 */
export class Resources {
  private readonly configured: Configured[];
  private readonly loopback = new Map<string, Resource>();
  /** Listener addresses already reported as having no resource: one report each, not one per request. */
  private readonly reported = new Set<string>();

  constructor(
    configured: readonly string[],
    /** The loopback default's host names (the handler's `allowedHosts`). */
    private readonly loopbackNames: readonly string[],
    private readonly onError: (error: Error) => void,
  ) {
    this.configured = configured.map(configuredOf);
  }

  /** Whether the resources are configured (otherwise: the loopback default). */
  get isConfigured(): boolean {
    return this.configured.length > 0;
  }

  /** The resource a request that arrived so, at `path`, is for; or its refusal (`403`). */
  of(arrival: Arrival, path: string): Resource | Rejection {
    const { configured } = this;
    if (configured.length === 1) return configured[0]!;
    const host = parseHost(arrival.host);
    if (configured.length > 1) {
      const found =
        host && configured.find((c) => c.hostname === host.hostname && (c.port ?? c.defaultPort) === (host.port ?? c.defaultPort));
      return found || notOurs(arrival.host);
    }
    if (!isLoopbackAddress(arrival.localAddress) || arrival.localPort === undefined) return this.unconfigured(arrival);
    const key = `${arrival.host}\u0000${arrival.localPort}\u0000${arrival.tls === true}\u0000${path}`;
    const known = this.loopback.get(key);
    if (known) return known;
    const fallback = arrival.tls ? 443 : 80;
    if (!host || !this.loopbackNames.includes(host.hostname) || (host.port ?? fallback) !== arrival.localPort) return notOurs(arrival.host);
    const port = arrival.localPort === fallback ? '' : `:${arrival.localPort}`;
    const trimmed = trimPath(path);
    const resource = `${arrival.tls ? 'https' : 'http'}://${host.hostname}${port}${trimmed === '/' ? '' : trimmed}`;
    const made = { resource, metadataUrl: metadataUrlOf(resource), path: trimmed };
    if (this.loopback.size >= MAX_REMEMBERED) this.loopback.delete(this.loopback.keys().next().value!);
    this.loopback.set(key, made);
    return made;
  }

  /** The one configured resource's path, when there is exactly one (the metadata's suffix must be it). */
  get fixedPath(): string | undefined {
    return this.configured.length === 1 ? this.configured[0]!.path : undefined;
  }

  private unconfigured(arrival: Arrival): Rejection {
    const address = arrival.localAddress ?? 'an unknown address';
    if (!this.reported.has(address) && this.reported.size < MAX_REMEMBERED) {
      this.reported.add(address);
      this.onError(
        new Error(
          `auth: a request reached ${address}, not a loopback listener whose port is known, and auth.resource is not set, so it has no resource to check tokens for: set auth.resource to the URL clients use for this endpoint (behind a proxy, the public one)`,
        ),
      );
    }
    return reject(
      403,
      ErrorCode.ServerError,
      'Forbidden: this server has no OAuth resource configured for this address (auth.resource is not set)',
    );
  }
}

/** A Host that names none of this server's resources: no token could be checked for it. */
function notOurs(host: string | undefined): Rejection {
  return reject(
    403,
    ErrorCode.ServerError,
    `Forbidden: Host ${JSON.stringify((host ?? '').slice(0, 100))} names no resource of this server (see auth.resource)`,
  );
}

function configuredOf(resource: string): Configured {
  const url = new URL(resource);
  const path = trimPath(url.pathname);
  return {
    resource,
    metadataUrl: metadataUrlOf(resource),
    path,
    hostname: url.hostname.toLowerCase(),
    port: url.port === '' ? undefined : Number(url.port),
    defaultPort: url.protocol === 'https:' ? 443 : 80,
  };
}

/** A path without its trailing `/` (the SDK client requires the resource to be a prefix of the URL it calls). */
export function trimPath(path: string): string {
  return path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
}
