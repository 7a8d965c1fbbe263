// mcp-kit on Express, mounted the way the README says.
import express from 'express';
import { mcpExpress } from '@mcp-kit/express';
import { exitOnSigterm, handleControl, trackResume } from './control.mjs';
import { createKitHandler } from './kit.mjs';
import { benchEnv } from './tools.mjs';

const env = benchEnv();
const { handler, fill, sessions, auth } = createKitHandler('bench-kit-express', env);
// The kit-express-otel row; loaded only there, so the other rows never load the SDK.
if (env.otel) (await import('./otel.mjs')).instrumentWithMemorySdk(handler);
const app = express();
app.use((req, res, next) => {
  if (handleControl(req, res, { fill, sessions, auth })) return;
  trackResume(req, res);
  next();
});
app.use('/mcp', mcpExpress(handler));
const server = app.listen(env.port, env.host, () => console.log(`LISTENING ${server.address().port}`));
exitOnSigterm();
