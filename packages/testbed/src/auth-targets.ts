/**
 * Every way of serving an mcp-kit handler with `auth`, in this process, so a test can build the
 * handler itself (its verifier is a function): Express (`mcpExpress` + `mcpAuthMetadata`, and
 * `mcpFirst`), Koa (`mcpKoa` with a path), Next's route handlers (`mcpNext` +
 * `mcpNextAuthMetadata`, called as `next start` calls them: a fetch `Request` per request) and the
 * bare fetch handler. Each listens on 127.0.0.1 and a free port, and is closed by the test.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import Koa from 'koa';
import { toFetchHandler, type McpHandler } from '@mcp-kit/core';
import { mcpAuthMetadata, mcpExpress, mcpFirst } from '@mcp-kit/express';
import { mcpKoa } from '@mcp-kit/koa';
import { mcpNext, mcpNextAuthMetadata } from '@mcp-kit/next';
import { serveFetch } from './fetch-runtime.js';

export interface AuthTarget {
  name: string;
  /** Serves `handler` at `/mcp` (and its metadata); resolves with the origin, e.g. `http://127.0.0.1:1234`. */
  start(handler: McpHandler): Promise<Served>;
}

export interface Served {
  origin: string;
  close(): Promise<void>;
}

/** Listens on 127.0.0.1 and a free port; `listening` is told them (a fetch handler cannot see its socket). */
async function listen(
  server: Server,
  handler: McpHandler,
  listening?: (listener: { localAddress: string; localPort: number }) => void,
): Promise<Served> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  listening?.({ localAddress: '127.0.0.1', localPort: (server.address() as AddressInfo).port });
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      await handler.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

type Routes = Record<string, ((request: Request) => Promise<Response>) | undefined>;

export const authTargets: AuthTarget[] = [
  {
    name: 'express',
    start(handler) {
      const app = express();
      app.use(mcpAuthMetadata(handler));
      app.use('/mcp', mcpExpress(handler));
      return listen(createServer(app), handler);
    },
  },
  {
    name: 'express mcpFirst',
    start(handler) {
      return listen(createServer(mcpFirst(express(), handler, { path: '/mcp' })), handler);
    },
  },
  {
    name: 'koa',
    start(handler) {
      const app = new Koa();
      app.use(mcpKoa(handler, { path: '/mcp' }));
      return listen(createServer(app.callback()), handler);
    },
  },
  {
    // What app/mcp/route.ts and app/.well-known/oauth-protected-resource/[[...path]]/route.ts export,
    // told where `next start` listens, as apps/next-example tells them.
    name: 'next routes',
    start(handler) {
      let mcp: Routes = {};
      let metadata: Routes = {};
      const notFound = async () => new Response(null, { status: 404 });
      const server = createServer((req, res) => {
        const path = (req.url ?? '/').split('?')[0]!;
        const routes = path === '/mcp' ? mcp : path.startsWith('/.well-known/oauth-protected-resource') ? metadata : {};
        // As `next start -H 127.0.0.1` does: request.url names the listening host `localhost`, not the Host header.
        void serveFetch(routes[req.method ?? 'GET'] ?? notFound, req, res, `http://localhost:${req.socket.localPort}`);
      });
      return listen(server, handler, (listener) => {
        mcp = { ...mcpNext(handler, listener) };
        metadata = { ...mcpNextAuthMetadata(handler, listener) };
      });
    },
  },
  {
    name: 'fetch',
    start(handler) {
      let fetchHandler = toFetchHandler(handler);
      return listen(
        createServer((req, res) => void serveFetch(fetchHandler, req, res)),
        handler,
        (listener) => (fetchHandler = toFetchHandler(handler, listener)),
      );
    },
  },
];
