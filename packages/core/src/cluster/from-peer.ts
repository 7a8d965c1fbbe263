import { header } from '../http/rules.js';
import type { SessionCluster } from '../ports/cluster.js';
import type { CoreRequest } from '../ports/http.js';

/**
 * Whether `req` came from another instance of the cluster (a forward, or a draining instance's
 * hand-over) rather than from a client: header `name` is there and, when the cluster
 * authenticates its internal hop (`verifyHop`), holds. A client that sets the header itself is
 * served as the client it is: it cannot make a draining instance keep its session, nor skip the
 * owner lookup (issue 20, item 10). Without a cluster there is no other instance to trust.
 */
export function fromPeer(cluster: SessionCluster | undefined, req: CoreRequest, name: string): boolean {
  const value = header(req.headers, name);
  if (value === undefined || !cluster) return false;
  if (!cluster.verifyHop) return true;
  return cluster.verifyHop(value, { method: req.method.toUpperCase(), sessionId: header(req.headers, 'mcp-session-id') });
}
