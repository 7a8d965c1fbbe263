import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { createMcpHandler, type McpHandler, type McpHandlerOptions } from '@mcp-kit/core';
import { mcpExpress } from '@mcp-kit/express';
import Koa from 'koa';
import { mcpKoa } from '@mcp-kit/koa';
import { createFixtureServer } from '@mcp-kit/fixtures';

/** Options a behaviour test may set; every adapter must honour them. */
export type HarnessOptions = Partial<McpHandlerOptions>;

export interface ServerUnderTest {
  /** The MCP endpoint. */
  url: string;
  /** Errors the handler reported through `onError` (none expected unless a test provokes them). */
  errors: Error[];
  close(): Promise<void>;
}

/** One way of serving the core: the behaviour suite runs against each. */
export interface Adapter {
  name: string;
  start(options?: HarnessOptions): Promise<ServerUnderTest>;
}

export function handlerFor(options: HarnessOptions, errors: Error[]): McpHandler {
  return createMcpHandler({
    server: () => createFixtureServer(),
    retryMs: 500,
    ...options,
    onError: (e) => {
      errors.push(e);
      options.onError?.(e);
    },
  });
}

/** Listens on 127.0.0.1 on a free port; closing ends the handler's streams and every socket. */
export async function listen(server: Server, handler: McpHandler, path: string, errors: Error[]): Promise<ServerUnderTest> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${path}`,
    errors,
    async close() {
      await handler.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export const expressAdapter: Adapter = {
  name: 'express',
  async start(options = {}) {
    const errors: Error[] = [];
    const handler = handlerFor(options, errors);
    const app = express();
    app.use('/mcp', mcpExpress(handler));
    return listen(createServer(app), handler, '/mcp', errors);
  },
};

export const koaAdapter: Adapter = {
  name: 'koa',
  async start(options = {}) {
    const errors: Error[] = [];
    const handler = handlerFor(options, errors);
    const app = new Koa();
    app.use(mcpKoa(handler, { path: '/mcp' }));
    return listen(createServer(app.callback()), handler, '/mcp', errors);
  },
};

export const adapters: Adapter[] = [expressAdapter, koaAdapter];
