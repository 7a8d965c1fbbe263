/**
 * The Python MCP SDK client (`mcp` 2.3.0, `mcp.client.auth.OAuthClientProvider`) running its own
 * OAuth flow against the built Koa example app started with AUTH_ISSUER, and a real authorization
 * server (oidc-provider). python_oauth_client.py plays the user's browser in its callback handler;
 * everything else is the SDK's: discovery from the 401, dynamic registration, PKCE, the token
 * request, and the step-up on long_task's `403 insufficient_scope`, inside the call. The venv is
 * the one tests/clients/python.test.ts uses (same name and pins: built once, cached outside the
 * checkout).
 */
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startAuthServer, type AuthServer } from '@mcp-kit/testbed/auth-server';
import type { Instance } from '@mcp-kit/testbed/cluster';
import { startProtectedApp } from '@mcp-kit/testbed/protected-app';
import { pythonVenv, runPythonJson } from '@mcp-kit/testbed/python';
import { completed, POLLED_CLOSES, POLLED_TASK, oneTo } from '@mcp-kit/testbed/long-task';
import { LEGACY } from '@mcp-kit/testbed/requests';

const script = fileURLToPath(new URL('../clients/python_oauth_client.py', import.meta.url));

interface PythonRequest {
  method: string;
  url: string;
  rpc: string | null;
  /** A digest of the bearer token sent, if any. */
  token: string | null;
  lastEventId: string | null;
  sessionId: string | null;
  status: number | null;
  wwwAuthenticate: string | null;
}

interface PythonRun {
  protocolVersion?: string;
  simpleText?: { content: unknown[]; isError: boolean };
  longTask?: { content: unknown[]; isError: boolean };
  logSteps: number[];
  authorizationUrls: string[];
  requests: PythonRequest[];
  error?: string;
}

let python: string;
let as: AuthServer;
let app: Instance;
beforeAll(async () => {
  // Same name and pins as tests/clients/python.test.ts: one venv for both (pip only on a new machine).
  [python, as] = await Promise.all([pythonVenv('mcp-2.3.0', ['mcp==2.3.0']), startAuthServer()]);
  app = await startProtectedApp('koa-example', as);
}, 300_000);
afterAll(async () => {
  await app?.stop('SIGKILL');
  await as?.close();
});

it('Python client on koa-example: first 401, authorization, step-up on 403, a polling long_task whose resumes carry the token', async () => {
  const run = await runPythonJson<PythonRun>(
    python,
    script,
    [JSON.stringify({ url: app.url, mode: 'legacy', timeoutS: 20, longTask: POLLED_TASK })],
    30_000,
  );
  const show = JSON.stringify(run, null, 1);
  expect(run.error, show).toBeUndefined();
  expect(run.protocolVersion).toBe(LEGACY);
  expect(run.simpleText?.isError).toBe(false);
  expect(run.longTask?.content).toEqual(completed(POLLED_TASK.steps));
  expect(run.logSteps).toEqual(oneTo(POLLED_TASK.steps));

  const toApp = run.requests.filter((r) => r.url === app.url);
  expect(toApp[0]).toMatchObject({ method: 'POST', rpc: 'initialize', status: 401, token: null });
  // Two authorizations: the 401's scope, then the 403's (with what it had).
  expect(run.authorizationUrls).toHaveLength(2);
  const [first, second] = run.authorizationUrls.map((u) => new URL(u).searchParams);
  expect(first!.getAll('resource')).toEqual([app.url]);
  expect(first!.get('scope')?.split(' ')).toContain('mcp');
  expect(first!.get('scope')?.split(' ')).not.toContain('mcp:long');
  expect(second!.get('scope')?.split(' ')).toEqual(expect.arrayContaining(['mcp', 'mcp:long']));
  expect(as.registrations).toBe(1);
  expect(as.tokens.map((t) => t.aud)).toEqual([app.url, app.url]);

  const calls = toApp.filter((r) => r.rpc === 'tools/call/long_task');
  expect(
    calls.map((c) => c.status),
    show,
  ).toEqual([403, 200]);
  expect(calls[0]!.wwwAuthenticate).toContain('error="insufficient_scope"');
  const stepUpToken = calls[1]!.token;
  expect(stepUpToken).not.toBe(calls[0]!.token);
  const resumes = toApp.filter((r) => r.method === 'GET' && r.lastEventId !== null);
  // One resume per close; on a slow machine a close may find the client away and two merge into one.
  expect(resumes.length).toBeGreaterThanOrEqual(1);
  expect(resumes.length).toBeLessThanOrEqual(POLLED_CLOSES);
  for (const resume of resumes) expect(resume).toMatchObject({ status: 200, token: stepUpToken });
});
