import { header } from '../http/rules.js';
import type { SessionOwners } from '../ports/owners.js';
import type { CoreRequest } from '../ports/http.js';

/**
 * Whether `req` came from another instance of the cluster (a forward, or a draining instance's
 * hand-over) rather than from a client: header `name` is there and, when the cluster
 * authenticates its internal hop (`verifyHop`), holds. A client that sets the header itself is
 * served as the client it is: it cannot make a draining instance keep its session, nor skip the
 * owner lookup (invariant: configuration-trusted).
 */
export function fromPeer(owners: SessionOwners, req: CoreRequest, name: string): boolean {
  const value = header(req.headers, name);
  if (value === undefined) return false;
  if (!owners.verifyHop) return true;
  return owners.verifyHop(value, { method: req.method.toUpperCase(), sessionId: header(req.headers, 'mcp-session-id') });
}
