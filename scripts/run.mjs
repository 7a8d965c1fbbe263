#!/usr/bin/env node
// The README's two commands: `npm run demo` and `npm test`. Works on a machine with only Node.js
// and npm: pnpm comes through npx (pinned), dependencies are installed on first use.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const PNPM = ['-y', 'pnpm@10.34.9'];
process.env.NEXT_TELEMETRY_DISABLED = '1';
process.env.TURBO_TELEMETRY_DISABLED = '1';
process.env.DO_NOT_TRACK = '1';

function run(cmd, args, opts = {}) {
  console.log(`\n$ ${cmd} ${args.join(' ')}`);
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', env: process.env, ...opts });
  return r.status ?? 1;
}

function must(cmd, args) {
  const status = run(cmd, args);
  if (status !== 0) {
    console.error(`\n✗ ${cmd} ${args.join(' ')} failed (exit ${status})`);
    process.exit(status);
  }
}

function prepare() {
  if (!existsSync(join(root, 'node_modules', '.modules.yaml'))) must('npx', [...PNPM, 'install', '--frozen-lockfile']);
  must('npx', [...PNPM, 'build']);
}

/**
 * What the tests need from Debian's packages, and how to tell each is there: a real redis-server
 * (the Redis tests start one on a free port), Python's venv (the Python SDK client tests make a
 * virtualenv) and Chromium (the live page's test). A fresh machine may lack them: installed with apt-get when we run as root.
 */
const SYSTEM_NEEDS = [
  { pkg: 'redis-server', check: ['redis-server', ['--version']], why: 'Redis 7 for the Redis tests' },
  { pkg: 'python3-venv', check: ['python3', ['-c', 'import ensurepip, venv']], why: "Python's venv for the Python SDK client tests" },
  { pkg: 'chromium', check: ['/usr/bin/chromium', ['--version']], why: "Chromium for the live page's test (driven by playwright-core)" },
];

function ensureSystemPackages() {
  const missing = SYSTEM_NEEDS.filter(({ check: [cmd, args] }) => spawnSync(cmd, args, { stdio: 'ignore' }).status !== 0);
  if (missing.length === 0) return;
  const names = missing.map((m) => m.pkg);
  if (process.getuid?.() !== 0 || spawnSync('apt-get', ['--version'], { stdio: 'ignore' }).status !== 0) {
    for (const m of missing) console.error(`✗ ${m.pkg} is missing (${m.why})`);
    console.error(`  install it (e.g. \`sudo apt-get install -y ${names.join(' ')}\`) and rerun`);
    process.exit(1);
  }
  must('apt-get', ['update']);
  must('apt-get', ['install', '-y', ...names]);
}

const task = process.argv[2];
if (task === 'demo') {
  prepare();
  process.exit(run('node', ['scripts/demo.mjs', ...process.argv.slice(3)]));
} else if (task === 'test') {
  ensureSystemPackages();
  prepare();
  must('npx', [...PNPM, 'run', 'typecheck']);
  must('npx', [...PNPM, 'run', 'lint']);
  mkdirSync(join(root, 'results'), { recursive: true });
  const unit = run('npx', [
    ...PNPM,
    'exec',
    'vitest',
    'run',
    '--reporter=default',
    '--reporter=json',
    '--outputFile.json=results/vitest.json',
  ]);
  let passed = 0;
  let failed = 0;
  try {
    const report = JSON.parse(readFileSync(join(root, 'results', 'vitest.json'), 'utf8'));
    passed += report.numPassedTests;
    failed += report.numFailedTests + (report.numTotalTests === 0 ? 1 : 0);
  } catch {
    failed++;
  }
  if (unit !== 0 && failed === 0) failed++;
  // The benchmark is not a test: CI only checks that its short mode still runs end to end.
  if (run('npx', [...PNPM, 'run', 'bench', '--short']) === 0) passed++;
  else failed++;
  // Each example app with each SDK major, at each revision it must conform to, and the settings of
  // an app worth its own run (`env`). See scripts/conformance-apps.json.
  const apps = JSON.parse(readFileSync(join(root, 'scripts', 'conformance-apps.json'), 'utf8'));
  for (const { app, env = {}, requirements = [], expectedFailures } of apps) {
    const settings = Object.entries(env).map(([k, v]) => `${k}=${v}`);
    console.log(`\nconformance of ${app}${settings.length > 0 ? ` with ${settings.join(' ')}` : ''}`);
    const args = ['scripts/conformance.mjs', app];
    if (requirements.length > 0) args.push('--requirements', requirements.join(','));
    if (expectedFailures) args.push('--expected-failures', expectedFailures);
    if (run('node', args, { env: { ...process.env, ...env } }) === 0) passed++;
    else failed++;
  }
  console.log(`\ntests: ${passed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
} else {
  console.error('usage: node scripts/run.mjs demo|test');
  process.exit(2);
}
