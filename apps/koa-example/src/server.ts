import Koa from 'koa';
import { createMcpHandler } from '@mcp-kit/core';
import { shutdownGracefully } from '@mcp-kit/core/node';
import { exampleApp, shutdownOptions } from '@mcp-kit/fixtures/example-app';
import { mcpKoa } from '@mcp-kit/koa';

// PORT, HOST, MCP_SDK, REDIS_URL (scale-out), HIBERNATE_MS, INSTANCE_NAME, …: see
// packages/fixtures/src/example-app.ts, which every example app shares.
const example = exampleApp('koa-example');
const mcp = createMcpHandler(example.options);

const app = new Koa();
const { instanceName } = example;
if (instanceName) {
  app.use(function servedBy(ctx, next) {
    ctx.set('x-served-by', instanceName);
    return next();
  });
}
app.use(mcpKoa(mcp, { path: '/mcp' }));

await example.ready();
const server = app.listen(example.port, example.host, () => console.log(example.describe()));
// SIGTERM (a deploy) or SIGINT: drain, stop listening, close the handler, exit (DRAIN_MS, CLOSE_GRACE_MS).
shutdownGracefully(server, mcp, shutdownOptions(example));
