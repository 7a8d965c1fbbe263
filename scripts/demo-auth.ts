// OAuth demo: an MCP server that wants tokens, and a client that gets them on its own.
// Starts a real authorization server (oidc-provider, as the tests use it: dynamic registration,
// PKCE, resource indicators, JWT access tokens; its login and consent answer by themselves) and
// apps/express-example with AUTH_ISSUER naming it, `mcp` needed for every request and `mcp:long`
// for long_task. Then the SDK v1 client, with an OAuthClientProvider of the kind an app writes,
// goes from its first 401 through discovery, registration and authorization to a session, steps up
// to `mcp:long` when long_task answers 403, and polls long_task to its end; every request it makes
// (to the MCP server and to the authorization server) and every redirect its user's browser
// follows is printed as it happens.
//
//   pnpm demo:auth            (builds first if needed)
//   pnpm demo:auth --once     (the same: stops after the flow, as demo:cluster and demo:serverless --once do)
//   pnpm demo:auth --keep     (then leaves both servers up for any MCP client; Ctrl-C stops them)
//
// Exits 0 when the call completed with every step, after exactly the expected refusals (one 401,
// one 403); 1 otherwise.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { Browser, startAuthServer, type AuthServer } from '@mcp-kit/testbed/auth-server';
import type { Instance } from '@mcp-kit/testbed/cluster';
import { TestOAuthClient, Wire, type WireRequest } from '@mcp-kit/testbed/oauth-client';
import { startProtectedApp } from '@mcp-kit/testbed/protected-app';

const root = fileURLToPath(new URL('..', import.meta.url));
const flags = process.argv.slice(2);
const unknown = flags.filter((flag) => flag !== '--once' && flag !== '--keep');
if (unknown.length > 0 || (flags.includes('--once') && flags.includes('--keep'))) {
  console.error(`usage: pnpm demo:auth [--once | --keep] (got ${flags.join(' ')})`);
  process.exit(2);
}
const keep = flags.includes('--keep');
const CALL = { steps: 6, intervalMs: 200, closeEvery: 2, retryMs: 300 };

const tty = Boolean(process.stdout.isTTY) && !process.env.NO_COLOR;
const paint = (code: number) => (s: string) => (tty ? `\x1b[${code}m${s}\x1b[0m` : s);
const [dim, bold, red, green, yellow, cyan] = [2, 1, 31, 32, 33, 36].map(paint) as Array<(s: string) => string>;
const t0 = Date.now();
const log = (tag: string, line: string) =>
  console.log(`${dim(`+${((Date.now() - t0) / 1000).toFixed(3)}s`)}  ${dim(tag.padEnd(8))} ${line}`);

function ensureBuilt(): void {
  if (existsSync(`${root}apps/express-example/dist/server.js`)) return;
  log('build', 'building the example apps (pnpm build) ...');
  const r = spawnSync('npx', ['-y', 'pnpm@10.34.9', 'build'], { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

/** `…` and the last 6 characters: enough to tell tokens apart, not enough to use one. */
const tokenTag = (token: string | undefined) => (token ? cyan(`Bearer …${token.slice(-6)}`) : dim('no token'));

/** The claims of a JWT, read without checking it (the server checked it; this is for people). */
function claims(token: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as Record<string, unknown>;
}

function describeRequest(as: AuthServer, app: Instance, r: WireRequest): void {
  const url = new URL(r.url);
  const where = r.url.startsWith(as.issuer) ? 'auth' : 'mcp';
  const status = r.status >= 400 ? red(String(r.status)) : green(String(r.status));
  const what = r.rpc ? ` ${bold(r.rpc)}` : '';
  const resume = r.lastEventId ? yellow(` Last-Event-ID ${r.lastEventId.slice(-8)}`) : '';
  const path = r.url.startsWith(app.url) ? url.pathname : `${url.pathname}${url.search}`;
  const token = where === 'mcp' ? `  ${tokenTag(r.token)}` : '';
  log(where, `${r.method} ${path}${what}${resume}${token} → ${status}`);
  if (r.wwwAuthenticate) log('', dim(`  WWW-Authenticate: ${r.wwwAuthenticate}`));
}

async function main(): Promise<void> {
  ensureBuilt();
  const as = await startAuthServer();
  log(
    'auth',
    `authorization server (oidc-provider) at ${bold(as.issuer)} ${dim('(a test server: in memory, its login and consent answer by themselves; hence its warnings)')}`,
  );
  const app = await startProtectedApp('express-example', as);
  log('mcp', `express-example at ${bold(app.url)} with AUTH_ISSUER=${as.issuer} AUTH_SCOPES=mcp AUTH_TOOL_SCOPES=long_task=mcp:long`);
  const stop = async (code: number) => {
    await app.stop('SIGTERM');
    await as.close();
    process.exit(code);
  };
  process.on('SIGINT', () => void stop(130));

  const wire = new Wire((r) => describeRequest(as, app, r));
  const browser = new Browser((url, status, location) =>
    log(
      'browser',
      `${url.pathname}${dim(url.search.length > 60 ? `${url.search.slice(0, 60)}…` : url.search)} → ${status} ${dim(`→ ${location ?? ''}`)}`,
    ),
  );
  const oauth = new TestOAuthClient(browser, 'mcp-kit demo:auth');
  const url = new URL(app.url);

  console.log(`\n${bold('1. connect without a token')}`);
  const first = new StreamableHTTPClientTransport(url, { authProvider: oauth, fetch: wire.fetch });
  try {
    await new Client({ name: 'demo-auth', version: '1.0.0' }).connect(first);
    throw new Error('the server took a client without a token');
  } catch (error) {
    if (!(error instanceof UnauthorizedError)) throw error;
  }
  log(
    'client',
    `the SDK sent the user to ${bold(`${new URL(oauth.authorizationUrls[0]!).pathname}`)} with scope=${oauth.authorizationUrls[0]!.searchParams.get('scope')} resource=${oauth.authorizationUrls[0]!.searchParams.get('resource')}`,
  );
  await first.finishAuth(await oauth.authorizationCode());
  const token = oauth.tokens()!.access_token;
  log('client', `finishAuth: token ${tokenTag(token)} ${dim(JSON.stringify(pick(claims(token))))}`);

  console.log(`\n${bold('2. connect with it, and call long_task, which needs mcp:long')}`);
  const transport = new StreamableHTTPClientTransport(url, { authProvider: oauth, fetch: wire.fetch });
  const client = new Client({ name: 'demo-auth', version: '1.0.0' });
  const steps: number[] = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
    const step = (n.params.data as { step?: number } | undefined)?.step;
    if (typeof step === 'number') steps.push(step);
  });
  await client.connect(transport);
  log('client', `session ${transport.sessionId}`);
  try {
    await client.callTool({ name: 'long_task', arguments: CALL });
    throw new Error('long_task ran with a token that lacks mcp:long');
  } catch (error) {
    if (!(error instanceof UnauthorizedError)) throw error;
  }
  log('client', `403: the SDK sent the user back with scope=${bold(oauth.authorizationUrls[1]!.searchParams.get('scope') ?? '')}`);
  await transport.finishAuth(await oauth.authorizationCode());
  const wider = oauth.tokens()!.access_token;
  log('client', `finishAuth: token ${tokenTag(wider)} ${dim(JSON.stringify(pick(claims(wider))))}`);

  console.log(`\n${bold('3. the call again: the server closes its stream every 2 steps, the client polls with its token')}`);
  const result = await client.callTool({ name: 'long_task', arguments: CALL }, undefined, { timeout: 30_000 });
  const text = (result.content as Array<{ text?: string }>)[0]?.text;
  log('client', `result: ${bold(String(text))}, steps ${steps.join(',')}`);
  await client.close();

  const toApp = wire.to(app.url);
  const refusals = toApp.filter((r) => r.status >= 400).map((r) => r.status);
  const ok =
    text === `completed ${CALL.steps} steps` &&
    steps.join() === Array.from({ length: CALL.steps }, (_, i) => i + 1).join() &&
    refusals.join() === '401,403' &&
    wire.resumes(app.url).every((r) => r.status === 200 && r.token === wider);
  console.log('');
  log(
    'summary',
    `${wire.requests.length} requests (${toApp.length} to /mcp, ${wire.resumes(app.url).length} resumes, all with the token), ${as.registrations} registration, ${as.tokens.length} tokens, refusals ${refusals.join(', ')}`,
  );
  log('summary', ok ? green(bold('the whole flow worked')) : red(bold('something went wrong (see above)')));
  if (!keep) return stop(ok ? 0 : 1);
  log('keep', `both stay up: MCP at ${bold(app.url)}, authorization server at ${bold(as.issuer)}; Ctrl-C stops them`);
}

function pick(c: Record<string, unknown>): Record<string, unknown> {
  return { iss: c.iss, aud: c.aud, sub: c.sub, client_id: c.client_id, scope: c.scope, exp: c.exp };
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
