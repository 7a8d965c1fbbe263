/**
 * A built example app (cluster.ts starts it as its start script does) with OAuth on:
 * AUTH_ISSUER naming a test authorization server, `mcp` needed for every request and `mcp:long`
 * for `long_task` (so a client first authorized for `mcp` steps up on its call). The authorization
 * server is told the app's `/mcp` URL is a resource it issues tokens for.
 */
import type { AuthServer } from './auth-server.js';
import { instance, type ExampleAppName, type Instance } from './cluster.js';
import { freePort } from './processes.js';

export const PROTECTED_APP_ENV = { AUTH_SCOPES: 'mcp', AUTH_TOOL_SCOPES: 'long_task=mcp:long', RETRY_MS: '100' };

export async function startProtectedApp(app: ExampleAppName, as: AuthServer, env: Record<string, string> = {}): Promise<Instance> {
  const started = instance(app, await freePort(), { AUTH_ISSUER: as.issuer, ...PROTECTED_APP_ENV, ...env }, app);
  await started.start();
  // After start: a first start may move to another port when its own was taken meanwhile.
  as.allowResource(started.url);
  return started;
}
