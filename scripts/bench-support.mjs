// What the Redis bench scripts (bench-redis.mjs, bench-cluster-modes.mjs) share: free ports, a
// redis-server of their own, an mcp-kit handler of the fixture on node:http, and a 2025 session.
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { createServer as netServer } from 'node:net';
import { createMcpHandler, handleNodeRequest } from '@mcp-kit/core';
import { createFixtureServer } from '@mcp-kit/fixtures';

export const freePort = () =>
  new Promise((resolve) => {
    const s = netServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });

/** A redis-server on a free loopback port, without persistence; kill `child` when done. */
export async function startRedis() {
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  child.on('error', (e) => {
    console.error(`redis-server could not start (${e.message}); install it: apt-get install -y redis-server`);
    process.exit(1);
  });
  return { url: `redis://127.0.0.1:${port}`, child };
}

/**
 * The fixture behind mcp-kit on node:http. `options` are the handler's, or a function of the
 * server's URL that returns them (a cluster's internalUrl is that URL).
 */
export async function serve(options = {}) {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}/mcp`;
  const resolved = typeof options === 'function' ? options(url) : options;
  const handler = createMcpHandler({ server: () => createFixtureServer(), dnsRebindingProtection: false, onError: () => {}, ...resolved });
  const server = createServer((req, res) => void handleNodeRequest(handler, req, res));
  await new Promise((r) => server.listen(port, '127.0.0.1', r));
  return {
    url,
    async close() {
      await handler.close();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

export const HEADERS = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': '2025-11-25',
};

/** A 2025-11-25 session (initialize, then notifications/initialized); returns its id. */
export async function session(url) {
  const init = {
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'bench', version: '1' } },
  };
  const res = await fetch(url, { method: 'POST', headers: HEADERS, body: JSON.stringify(init) });
  await res.text();
  const id = res.headers.get('mcp-session-id');
  await fetch(url, {
    method: 'POST',
    headers: { ...HEADERS, 'mcp-session-id': id },
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
  }).then((r) => r.text());
  return id;
}
