// Serverless demo: the simulation of tests/serverless/simulation.test.ts, told as it
// happens. Three instances (two `next start` of apps/next-example, one apps/express-example) in a
// shared cluster (`CLUSTER=shared`: no internalUrl, no route between them) on one redis-server,
// behind a proxy that sends each request to a random instance and freezes (SIGSTOP) every instance
// with no request in flight and nothing registered with `waitUntil`, as a serverless platform
// does; a request for a frozen instance thaws it (SIGCONT). 30 SDK v1 clients poll `long_task`
// (the tool closes its stream every 2 steps) and answer an elicitation mid-call; 20 SDK v2 clients
// with ext-tasks run `long_task` as a task and answer `confirm_delete` through `tasks/update`.
//
//   pnpm demo:serverless              (builds first if needed; needs redis-server: apt-get install -y redis-server)
//   pnpm demo:serverless --once       (stops after the summary; exit code 1 if anything was lost)
//   pnpm demo:serverless --quiet      (the summary only, not a line per request)
//   SEED=123 pnpm demo:serverless     (the proxy's dice, to replay a run)
//
// Without --once the platform stays up after the summary for any MCP client (Ctrl-C stops it and
// the processes it started, by PID).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { startServerless, type ServerlessPlatform } from '@mcp-kit/testbed/serverless';
import { figures, legacyClient, taskClient, type ClientRun } from '@mcp-kit/testbed/serverless-workload';

const root = fileURLToPath(new URL('..', import.meta.url));
const flags = process.argv.slice(2);
const unknown = flags.filter((flag) => flag !== '--once' && flag !== '--quiet');
if (unknown.length > 0) {
  console.error(`usage: pnpm demo:serverless [--once] [--quiet] (unknown: ${unknown.join(' ')})`);
  process.exit(2);
}
const once = flags.includes('--once');
const quiet = flags.includes('--quiet');
const LEGACY_CLIENTS = 30;
const TASK_CLIENTS = 20;

const tty = Boolean(process.stdout.isTTY) && !process.env.NO_COLOR;
const paint = (code: number) => (s: string) => (tty ? `\x1b[${code}m${s}\x1b[0m` : s);
const [dim, bold, red, green, cyan] = [2, 1, 31, 32, 36].map(paint) as [
  (s: string) => string,
  (s: string) => string,
  (s: string) => string,
  (s: string) => string,
  (s: string) => string,
];
const t0 = Date.now();
const log = (line: string) => console.log(`${dim(`+${((Date.now() - t0) / 1000).toFixed(1).padStart(5)}s`)}  ${line}`);

function ensureBuilt(): void {
  const built = [`${root}apps/express-example/dist/server.js`, `${root}apps/next-example/.next/BUILD_ID`];
  if (built.every((f) => existsSync(f))) return;
  log('building the example apps (pnpm build) ...');
  const r = spawnSync('npx', ['-y', 'pnpm@10.34.9', 'build'], { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

async function main(): Promise<void> {
  ensureBuilt();
  log(bold('starting redis-server and 3 instances in a shared cluster (no internalUrl): node-0, node-1 (next start), node-2 (express)'));
  const platform: ServerlessPlatform = await startServerless({
    apps: ['next-example', 'next-example', 'express-example'],
    env: { HEARTBEAT_MS: '300', RETRY_MS: '100' },
    ...(process.env.SEED ? { seed: Number(process.env.SEED) } : {}),
    story: quiet ? undefined : (line) => log(line.includes('frozen') || line.includes('(thawed)') ? cyan(line) : line),
  });
  const stop = async (code: number) => {
    await platform.close();
    process.exit(code);
  };
  process.on('SIGINT', () => void stop(130));
  log(`platform at ${bold(platform.url)}, seed ${platform.seed}; every instance starts frozen`);
  const url = platform.url;
  const runs: ClientRun[] = await Promise.all([
    ...Array.from({ length: LEGACY_CLIENTS }, async (_, i) => {
      await new Promise((resolve) => setTimeout(resolve, i * 200));
      return legacyClient(url, `legacy-${i}`);
    }),
    ...Array.from({ length: TASK_CLIENTS }, async (_, i) => {
      await new Promise((resolve) => setTimeout(resolve, 100 + i * 300));
      return taskClient(url, `tasks-${i}`);
    }),
  ]);
  console.log('');
  for (const line of figures(platform, runs).split('\n')) log(line);
  const failed = runs.filter((r) => r.problems.length > 0 || r.errors.length > 0);
  const bad = platform.log.filter((r) => r.status === 404 || r.status >= 500);
  for (const r of failed) log(red(`${r.name}: ${[...r.problems, ...r.errors].join('; ')}`));
  for (const r of bad) log(red(`${r.method} ${r.kind} → node-${r.instance}: ${r.status}${r.error ? ` (${r.error})` : ''}`));
  const lost = failed.length > 0 || bad.length > 0;
  log(lost ? red(bold('something was lost')) : green(bold('nothing lost: every step once and in order, every result, no 404, no 5xx')));
  if (once) return stop(lost ? 1 : 0);
  log(`the platform stays up at ${bold(url)} for any MCP client (it freezes idle instances as before); Ctrl-C stops it`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
