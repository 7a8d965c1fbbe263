/**
 * Python for the client tests: a virtualenv under `.tmp/python/` (gitignored) with pinned packages
 * from the registry pip is configured for, built on first use and reused while its marker says it
 * holds exactly those packages; and a runner for scripts that print JSON. Every child is spawned
 * here and killed by its own pid when its deadline passes.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../', import.meta.url));

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
    const child = spawn(command, args, {
      cwd: options.cwd ?? root,
      env: { ...process.env, ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
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

/**
 * The python of a venv `.tmp/python/<name>` holding `requirements` (pip specifiers, pinned), built
 * if absent or built for other requirements. Slow only the first time on a machine (pip downloads),
 * hence the generous `timeoutMs`; one test file per venv name, so no two builds race.
 */
export async function pythonVenv(name: string, requirements: string[], timeoutMs = 300_000): Promise<string> {
  const dir = join(root, '.tmp', 'python', name);
  const python = join(dir, 'bin', 'python');
  const marker = join(dir, '.mcp-kit-requirements');
  const wanted = requirements.join('\n');
  if (existsSync(python) && existsSync(marker) && readFileSync(marker, 'utf8') === wanted) return python;

  // A missing or stale marker means an interrupted or different build: start over.
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(join(root, '.tmp', 'python'), { recursive: true });
  const deadline = Date.now() + timeoutMs;
  const left = () => Math.max(1_000, deadline - Date.now());
  const version = await run(hostPython, ['-c', 'import sys; print(sys.version_info >= (3, 10))'], { timeoutMs: 30_000 });
  mustSucceed(`${hostPython} --version`, version);
  if (version.stdout.trim() !== 'True') throw new Error(`${hostPython} is older than 3.10, which the Python MCP SDK needs`);
  const venv = await run(hostPython, ['-m', 'venv', dir], { timeoutMs: left() });
  // Debian and Ubuntu ship the venv module without ensurepip unless python3-venv is installed.
  if (venv.code !== 0 && `${venv.stdout}${venv.stderr}`.includes('ensurepip'))
    venv.stderr += '\n(on Debian/Ubuntu: apt-get install -y python3-venv)';
  mustSucceed(`${hostPython} -m venv`, venv);
  const env = { PIP_DISABLE_PIP_VERSION_CHECK: '1', PIP_NO_INPUT: '1' };
  mustSucceed(`pip install ${wanted}`, await run(python, ['-m', 'pip', 'install', ...requirements], { timeoutMs: left(), env }));
  writeFileSync(marker, wanted);
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
