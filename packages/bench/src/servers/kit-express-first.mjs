// mcp-kit on an Express app, with MCP routed before Express (`mcpFirst`): the README's recipe for
// a busy MCP endpoint. Express serves everything else, here the bench's control plane.
import { createServer } from 'node:http';
import express from 'express';
import { mcpFirst } from '@mcp-kit/express';
import { exitOnSigterm, handleControl } from './control.mjs';
import { createKitHandler } from './kit.mjs';
import { benchEnv } from './tools.mjs';

const env = benchEnv();
const { handler, fill, sessions } = createKitHandler('bench-kit-express-first', env);
const app = express();
app.use((req, res, next) => {
  if (!handleControl(req, res, { fill, sessions })) next();
});
const server = createServer(mcpFirst(app, handler, { path: '/mcp' }));
server.listen(env.port, env.host, () => console.log(`LISTENING ${server.address().port}`));
exitOnSigterm();
