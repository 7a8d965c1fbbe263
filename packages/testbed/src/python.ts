/**
 * Python for the client tests: a virtualenv per set of pinned packages, in a cache outside the
 * checkout (`$MCP_KIT_CACHE`, default `~/.cache/mcp-kit`) so fresh clones on one machine share it,
 * built on first use and reused while its marker says it holds exactly those packages; and a runner
 * for scripts that print JSON. Every child is spawned here and killed by its own pid when its
 * deadline passes.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startProcess } from './processes.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));

export interface Finished {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `command` to its end, or kills it (SIGKILL, by the pid spawned here) after `timeoutMs` and
 * rejects. Asynchronous on purpose: servers under test may live in this process's event loop.
 */
export function run(
  command: string,
  args: string[],
  options: { timeoutMs: number; cwd?: string; env?: NodeJS.ProcessEnv },
): Promise<Finished> {
  return new Promise((resolve, reject) => {
    const child = startProcess(`${command} ${args[0] ?? ''}`.trim(), command, args, {
      cwd: options.cwd ?? root,
      env: { ...process.env, ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    // Both piped, as asked above.
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${command} ${args.join(' ')} did not finish within ${options.timeoutMs} ms\n${stderr.slice(-4000)}`));
    }, options.timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

function mustSucceed(what: string, finished: Finished): void {
  if (finished.code !== 0) {
    throw new Error(
      `${what} failed (exit ${finished.code ?? finished.signal}):\n${finished.stdout.slice(-2000)}\n${finished.stderr.slice(-4000)}`,
    );
  }
}

/** The interpreter a venv is built from: `$PYTHON`, else `python3` on the PATH. */
export const hostPython = process.env.PYTHON ?? 'python3';

/** Where venvs live: outside the checkout, so a fresh clone does not pay for pip again. */
export const venvRoot = join(process.env.MCP_KIT_CACHE ?? join(homedir(), '.cache', 'mcp-kit'), 'python');

/**
 * The python of a venv holding `requirements` (pip specifiers, pinned) for the interpreter at hand,
 * under `venvRoot` in a folder keyed by both, built if absent. Built under a temporary name and
 * renamed into place, so two runs on one machine never use a half-built venv (we only ever run its
 * `bin/python`, which works from the new path).
 */
export async function pythonVenv(name: string, requirements: string[], timeoutMs = 300_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  const left = () => Math.max(1_000, deadline - Date.now());
  const version = await run(hostPython, ['-c', 'import sys; print(sys.version_info >= (3, 10), sys.version)'], { timeoutMs: 30_000 }).catch(
    (error: NodeJS.ErrnoException) => {
      if (error.code !== 'ENOENT') throw error;
      throw new Error(
        `${hostPython} not found: the Python SDK client tests need Python 3.10 or later with venv. ` +
          'Install it (`apt-get install -y python3 python3-venv` on Debian/Ubuntu), or name one in PYTHON.',
      );
    },
  );
  mustSucceed(`${hostPython} --version`, version);
  if (!version.stdout.startsWith('True')) throw new Error(`${hostPython} is older than 3.10, which the Python MCP SDK needs`);
  const wanted = requirements.join('\n');
  const key = createHash('sha256').update(`${version.stdout}\n${wanted}`).digest('hex').slice(0, 12);
  const dir = join(venvRoot, `${name}-${key}`);
  const python = join(dir, 'bin', 'python');
  const marker = join(dir, '.mcp-kit-requirements');
  if (existsSync(python) && existsSync(marker) && readFileSync(marker, 'utf8') === wanted) return python;

  const building = `${dir}.building-${process.pid}`;
  rmSync(building, { recursive: true, force: true });
  mkdirSync(venvRoot, { recursive: true });
  const venv = await run(hostPython, ['-m', 'venv', building], { timeoutMs: left() });
  // Debian and Ubuntu ship the venv module without ensurepip unless python3-venv is installed.
  if (venv.code !== 0 && `${venv.stdout}${venv.stderr}`.includes('ensurepip'))
    venv.stderr += '\n(on Debian/Ubuntu: apt-get install -y python3-venv)';
  mustSucceed(`${hostPython} -m venv`, venv);
  // PIP_RETRIES=1: where pip is set up with a local extra index and the default one is out of reach,
  // its default 5 retries with backoff cost ~8 s per package (3.5 min for mcp's ~30), for nothing.
  const env = { PIP_DISABLE_PIP_VERSION_CHECK: '1', PIP_NO_INPUT: '1', PIP_RETRIES: process.env.PIP_RETRIES ?? '1' };
  const pip = await run(join(building, 'bin', 'python'), ['-m', 'pip', 'install', ...requirements], { timeoutMs: left(), env });
  mustSucceed(`pip install ${wanted}`, pip);
  writeFileSync(join(building, '.mcp-kit-requirements'), wanted);
  rmSync(dir, { recursive: true, force: true });
  renameSync(building, dir);
  return python;
}

/** Runs a script that prints one JSON document on stdout; its stderr is kept for the failure message. */
export async function runPythonJson<T>(python: string, script: string, args: string[], timeoutMs: number): Promise<T> {
  const finished = await run(python, [script, ...args], { timeoutMs, env: { PYTHONUNBUFFERED: '1' } });
  mustSucceed(`python ${script}`, finished);
  try {
    return JSON.parse(finished.stdout) as T;
  } catch {
    throw new Error(`python ${script} printed no JSON:\n${finished.stdout.slice(-2000)}\n${finished.stderr.slice(-4000)}`);
  }
}
