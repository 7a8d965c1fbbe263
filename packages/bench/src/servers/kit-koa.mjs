// mcp-kit on Koa, mounted the way the README says.
import Koa from 'koa';
import { mcpKoa } from '@mcp-kit/koa';
import { exitOnSigterm, handleControl, trackResume } from './control.mjs';
import { createKitHandler } from './kit.mjs';
import { benchEnv } from './tools.mjs';

const env = benchEnv();
const { handler, fill, sessions } = createKitHandler('bench-kit-koa', env);
const app = new Koa();
app.use(async (ctx, next) => {
  if (handleControl(ctx.req, ctx.res, { fill, sessions })) {
    ctx.respond = false;
    return;
  }
  trackResume(ctx.req, ctx.res);
  await next();
});
app.use(mcpKoa(handler, { path: '/mcp' }));
const server = app.listen(env.port, env.host, () => console.log(`LISTENING ${server.address().port}`));
exitOnSigterm();
