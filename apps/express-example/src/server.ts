import express from 'express';
import { createMcpHandler } from '@mcp-kit/core';
import { shutdownGracefully } from '@mcp-kit/core/node';
import { mcpAuthMetadata, mcpExpress } from '@mcp-kit/express';
import { exampleApp, shutdownOptions } from '@mcp-kit/fixtures/example-app';
import { mountLivePage } from './live/mount.js';

// PORT, HOST, MCP_SDK, REDIS_URL (scale-out), HIBERNATE_MS, INSTANCE_NAME, …: see
// packages/fixtures/src/example-app.ts, which every example app shares.
const example = exampleApp('express-example');
const mcp = createMcpHandler(example.options);

const app = express();
const { instanceName } = example;
if (instanceName) {
  app.use(function servedBy(_req, res, next) {
    res.setHeader('x-served-by', instanceName);
    next();
  });
}
// /mcp-kit/live: sessions, streams and polls as they happen (LIVE_PAGE=0 leaves it out; it turns
// the engine's event reporting on).
if (process.env.LIVE_PAGE !== '0') mountLivePage(app, mcp);
// AUTH_ISSUER: tokens required; clients find where to get one in the Protected Resource Metadata
// (RFC 9728) at /.well-known/oauth-protected-resource/mcp, which the 401 names.
if (example.auth) app.use(mcpAuthMetadata(mcp));
app.use('/mcp', mcpExpress(mcp));

await example.ready();
// Express 5 calls this back with the error when the port is taken: say so and exit, never claim to listen.
const server = app.listen(example.port, example.host, (error?: Error) => {
  if (!error) return console.log(example.describe());
  console.error(`${example.name}: cannot listen on ${example.host}:${example.port}: ${error.message}`);
  process.exit(1);
});
// SIGTERM (a deploy) or SIGINT: drain, stop listening, close the handler, exit (DRAIN_MS, CLOSE_GRACE_MS).
shutdownGracefully(server, mcp, shutdownOptions(example));
