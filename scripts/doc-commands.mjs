#!/usr/bin/env node
// Every command a README or a doc tells a user to run, run in its short form: a stage of `npm test`.
//
//   node scripts/doc-commands.mjs            check the list, then run every command (needs a build and
//                                            pnpm on PATH, as `npm test` gives its stages)
//   node scripts/doc-commands.mjs --check    only check that the docs' commands and the list agree
//   node scripts/doc-commands.mjs --only demo:cluster   run only the commands containing that text
//
// It reads the shell blocks (```sh, ```bash, ```shell) of README.md, docs/*.md and packages/*/README.md
// and holds each line against COMMANDS below, which says how the stage runs it:
//   run      run as written; it must exit 0 within `timeoutMs`;
//   serve    a server: run until `url` answers (any HTTP status), then stop its process group by PID;
//            `PORT=…` in the command, and the PORT variable, become a free port;
//   covered  run elsewhere in `npm test` (named), so not twice.
// A command in a doc that is not listed fails, and so does a listed one no doc shows any more, and a
// `demo*` script of package.json that nothing here runs. Results: one line per command, and
// results/doc-commands.json (the counts `npm test` adds up, in vitest's report's terms).
import { spawn } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join, relative, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** How each documented command is run. Keys are the command exactly as the docs write it (comments stripped). */
export const COMMANDS = {
  'npm run demo': { how: 'run', timeoutMs: 180_000 },
  'npm test': { how: 'covered', by: 'npm test itself' },
  'node scripts/doc-commands.mjs --check': { how: 'run', timeoutMs: 30_000 },
  'npm run demo -- --keep': { how: 'serve', url: 'http://127.0.0.1:{port}/mcp-kit/live', timeoutMs: 180_000 },
  'pnpm demo:cluster --once': { how: 'run', timeoutMs: 240_000 },
  'pnpm demo:cluster --redis-cluster --once': { how: 'run', timeoutMs: 240_000 },
  'pnpm demo:serverless --once': { how: 'run', timeoutMs: 300_000 },
  'pnpm demo:auth': { how: 'run', timeoutMs: 180_000 },
  'PORT=3000 pnpm --filter express-example start': { how: 'serve', url: 'http://127.0.0.1:{port}/mcp', timeoutMs: 60_000 },
  'PORT=3000 pnpm --filter koa-example start': { how: 'serve', url: 'http://127.0.0.1:{port}/mcp', timeoutMs: 60_000 },
  'PORT=3000 pnpm --filter next-example start': { how: 'serve', url: 'http://127.0.0.1:{port}/mcp', timeoutMs: 90_000 },
  'npx -y pnpm@10.34.9 build': { how: 'covered', by: "npm test's build stage" },
  'npx -y pnpm@10.34.9 bench': { how: 'covered', by: "the stage 'bench --short --no-next' (the full run takes ~15 min)" },
  'npx -y pnpm@10.34.9 bench --short': {
    how: 'covered',
    by: "the stage 'bench --short --no-next' (next-example's tests cover the Next servers)",
  },
  'npx -y pnpm@10.34.9 bench --short --no-next': { how: 'covered', by: "the stage 'bench --short --no-next'" },
  'pnpm add @mcp-kit/next @mcp-kit/core @modelcontextprotocol/sdk': {
    how: 'covered',
    by: 'tests/packaging/packed-install.test.ts (the packed packages installed into a scratch app)',
  },
};

/** The markdown files whose shell blocks are commands for users. */
function docFiles() {
  const files = ['README.md'];
  for (const name of readdirSync(join(root, 'docs'))) if (name.endsWith('.md')) files.push(join('docs', name));
  for (const dir of readdirSync(join(root, 'packages'))) {
    try {
      readFileSync(join(root, 'packages', dir, 'README.md'));
      files.push(join('packages', dir, 'README.md'));
    } catch {
      // a package without a README
    }
  }
  return files;
}

/** Each command line of each shell block of `files` (relative to the repository, or absolute): `{ command, where }` (`file:line`). */
export function documentedCommands(files = docFiles()) {
  const found = [];
  for (const file of files) {
    const lines = readFileSync(resolve(root, file), 'utf8').split('\n');
    let inShell = false;
    let pending = '';
    for (const [i, line] of lines.entries()) {
      const fence = /^\s*```(\S*)/.exec(line);
      if (fence) {
        inShell = !inShell && ['sh', 'bash', 'shell', 'console'].includes(fence[1]);
        pending = '';
        continue;
      }
      if (!inShell) continue;
      // A comment after the command (` # …`) is for the reader; a line that is only one is not a command.
      const text = line.replace(/\s+#\s.*$/, '').trim();
      if (text === '' || text.startsWith('#')) continue;
      if (text.endsWith('\\')) {
        pending += `${text.slice(0, -1).trim()} `;
        continue;
      }
      found.push({ command: `${pending}${text}`, where: `${file}:${i + 1}` });
      pending = '';
    }
  }
  return found;
}

/** What is wrong between the docs, the list and package.json: one line each. */
export function listProblems(documented = documentedCommands()) {
  const problems = [];
  for (const { command, where } of documented) {
    if (!(command in COMMANDS))
      problems.push(`${where}: \`${command}\` is not in scripts/doc-commands.mjs: say there how npm test runs it (run, serve or covered)`);
  }
  const shown = new Set(documented.map((d) => d.command));
  for (const command of Object.keys(COMMANDS)) {
    if (!shown.has(command)) problems.push(`\`${command}\` is listed in scripts/doc-commands.mjs but no doc shows it any more: remove it`);
  }
  const scripts = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).scripts;
  const ran = Object.entries(COMMANDS)
    .filter(([, spec]) => spec.how !== 'covered')
    .map(([command]) => command);
  for (const name of Object.keys(scripts).filter((s) => s.startsWith('demo'))) {
    const forms = name === 'demo' ? ['npm run demo'] : [`pnpm ${name}`, `npm run ${name}`];
    if (!ran.some((command) => forms.some((form) => command === form || command.startsWith(`${form} `))))
      problems.push(`package.json's "${name}" is run by no documented command: show it in a doc and list it here`);
  }
  return problems;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer().once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Stops a process group started detached: SIGTERM, then SIGKILL if it is still there 15 s later. */
async function stopGroup(child, exited) {
  const signal = (sig) => {
    try {
      process.kill(-child.pid, sig);
    } catch {
      // gone already
    }
  };
  signal('SIGTERM');
  const late = setTimeout(() => signal('SIGKILL'), 15_000);
  await exited;
  clearTimeout(late);
  // What the group's leader left behind (a server it started) goes with the group.
  signal('SIGKILL');
}

/** Runs one listed command; resolves to { ok, seconds, detail }. Its output goes to ours as it comes. */
async function runOne(command, spec) {
  const started = performance.now();
  const port = spec.how === 'serve' ? await freePort() : undefined;
  const text = port === undefined ? command : command.replace(/\bPORT=\d+/, `PORT=${port}`);
  const env = { ...process.env, NO_COLOR: '1', ...(port === undefined ? {} : { PORT: String(port) }) };
  console.log(`\n$ ${text}`);
  const child = spawn('/bin/sh', ['-c', text], { cwd: root, env, detached: true, stdio: ['ignore', 'inherit', 'inherit'] });
  const exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? (signal ? 128 : 1))));
  let timer;
  const timedOut = new Promise((resolve) => (timer = setTimeout(() => resolve('timeout'), spec.timeoutMs)));
  const seconds = () => (performance.now() - started) / 1000;
  try {
    if (spec.how === 'run') {
      const outcome = await Promise.race([exited, timedOut]);
      if (outcome === 'timeout') {
        await stopGroup(child, exited);
        return { ok: false, seconds: seconds(), detail: `still running after ${spec.timeoutMs / 1000} s` };
      }
      return { ok: outcome === 0, seconds: seconds(), detail: `exit ${outcome}` };
    }
    const url = spec.url.replace('{port}', String(port));
    let done = false;
    const answered = (async () => {
      while (!done) {
        try {
          const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
          await res.body?.cancel();
          return `answered ${res.status} at ${url}`;
        } catch {
          await new Promise((resolve) => setTimeout(resolve, 250));
        }
      }
      return undefined;
    })();
    const outcome = await Promise.race([answered, exited.then((code) => ({ code })), timedOut]);
    done = true;
    if (typeof outcome === 'string' && outcome !== 'timeout') {
      await stopGroup(child, exited);
      return { ok: true, seconds: seconds(), detail: `${outcome}; stopped` };
    }
    await stopGroup(child, exited);
    const why =
      outcome === 'timeout' ? `no answer at ${url} within ${spec.timeoutMs / 1000} s` : `exited (${outcome.code}) before answering`;
    return { ok: false, seconds: seconds(), detail: why };
  } finally {
    clearTimeout(timer);
  }
}

async function main() {
  const documented = documentedCommands();
  const problems = listProblems(documented);
  for (const problem of problems) console.error(`✗ ${problem}`);
  if (process.argv.includes('--check')) {
    console.log(`${documented.length} documented commands, ${problems.length} problems`);
    process.exit(problems.length === 0 ? 0 : 1);
  }
  const results = [];
  const where = new Map();
  for (const { command, where: at } of documented) where.set(command, [...(where.get(command) ?? []), at]);
  const only = process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1] : undefined;
  for (const [command, spec] of Object.entries(COMMANDS)) {
    if (!where.has(command) || (only !== undefined && !command.includes(only))) continue;
    if (spec.how === 'covered') {
      console.log(`\n· ${command}: run by ${spec.by}`);
      continue;
    }
    const result = await runOne(command, spec);
    results.push({ command, ...result });
    console.log(`${result.ok ? '✓' : '✗'} ${command} (${where.get(command).join(', ')}): ${result.detail}, ${result.seconds.toFixed(1)} s`);
  }
  console.log('\n── doc commands ──');
  for (const r of results) console.log(`${r.ok ? '✓' : '✗'} ${r.command}: ${r.detail} (${r.seconds.toFixed(1)} s)`);
  for (const problem of problems) console.log(`✗ ${problem}`);
  const failed = results.filter((r) => !r.ok).length + problems.length;
  const passed = results.filter((r) => r.ok).length + (problems.length === 0 ? 1 : 0);
  mkdirSync(join(root, 'results'), { recursive: true });
  const report = join(root, 'results', 'doc-commands.json');
  writeFileSync(
    report,
    JSON.stringify({ numPassedTests: passed, numFailedTests: failed, numTotalTests: passed + failed, results, problems }, null, 2),
  );
  console.log(`doc commands: ${passed} passed, ${failed} failed (${relative(root, report)})`);
  process.exit(failed === 0 ? 0 : 1);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main();
