/**
 * Every process the testbed starts goes through here: each is recorded with what started it (a
 * demo's script, or the test a runner names through {@link setStartedBy}), stopped by its own PID,
 * and, should it still run when this process ends, named on stderr and killed, so that nothing a
 * demo or a test started outlives it unseen.
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { writeSync } from 'node:fs';
import { createServer } from 'node:net';
import { relative } from 'node:path';

/** A process started here and not exited yet. */
export interface RunningProcess {
  pid: number;
  /** What it is, e.g. `redis-server 127.0.0.1:6379` or `express-example node-0`. */
  name: string;
  /** Who started it: the script, or the test file and test name a runner gave. */
  startedBy: string;
}

/** The script this process runs, relative to the working directory: a demo's or a benchmark's name. */
const scriptName = () => (process.argv[1] ? relative(process.cwd(), process.argv[1]) : `pid ${process.pid}`);

// One state per process, even should this module be loaded more than once (a test runner that
// reloads sources per test file): the exit hooks below then see every process started, and the
// runner's label and refusal reach every copy.
interface State {
  running: Map<ChildProcess, RunningProcess>;
  startedBy: () => string;
  refusal: string | undefined;
}
const key = Symbol.for('mcp-kit.testbed.processes');
const state: State = ((globalThis as Record<symbol, unknown>)[key] ??= {
  running: new Map(),
  startedBy: scriptName,
  refusal: undefined,
} satisfies State) as State;
const running = state.running;

/**
 * Names who starts processes from now on: a test runner passes the current test's file and name
 * (tests/support/setup.ts does, for vitest), so a process left running says where it came from.
 */
export function setStartedBy(label: () => string): void {
  state.startedBy = label;
}

/** Who starts a process now, in characters safe in a process title. */
export function startedBy(): string {
  let label: string;
  try {
    label = state.startedBy();
  } catch {
    label = scriptName();
  }
  return label.replace(/[^\w./>:-]+/g, '_');
}

/**
 * Makes every later start throw `reason`: a run that promises to need no services (redis-server,
 * the example apps' builds, Python) finds out at the first process a test tries to start.
 * `undefined` allows starts again.
 */
export function refuseProcesses(reason: string | undefined): void {
  state.refusal = reason;
}

/**
 * Spawns `command` as {@link spawn} does (stdout and stderr piped unless `options.stdio` says
 * otherwise) and records it under `name` until it exits.
 */
export function startProcess(name: string, command: string, args: readonly string[], options: SpawnOptions = {}): ChildProcess {
  if (state.refusal !== undefined) throw new Error(`${name} not started: ${state.refusal}`);
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], ...options });
  if (child.pid !== undefined) running.set(child, { pid: child.pid, name, startedBy: startedBy() });
  child.once('exit', () => running.delete(child));
  child.once('error', () => running.delete(child));
  return child;
}

/** Whether `child` is still running (it has neither exited nor been ended by a signal). */
export function isRunning(child: ChildProcess | undefined): child is ChildProcess {
  return !!child && child.exitCode === null && child.signalCode === null;
}

/** Sends `signal` to `child` by its PID and resolves once it has exited (at once if it had). */
export async function stopProcess(child: ChildProcess | undefined, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  if (!isRunning(child)) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    process.kill(child.pid as number, signal);
  } catch {
    // Gone between the check and the signal.
  }
  await exited;
}

/** What this process started and is still running. */
export function leftRunning(): RunningProcess[] {
  return [...running.values()];
}

/** Kills (SIGKILL, by PID) whatever is still running, saying what and who started it (stderr is the run's log). */
function killLeftovers(): void {
  for (const [child, p] of running) {
    writeSync(2, `${p.name} (pid ${p.pid}) started by ${p.startedBy} was still running as its parent process ended: killed\n`);
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
    running.delete(child);
  }
}

// A process that ends takes what it started with it, whatever its own cleanup managed to do: a
// test runner ends a worker with SIGTERM, a user a demo with Ctrl-C (SIGINT reaches the children
// too, being in the terminal's process group; SIGTERM does not). Hooked once per process, even
// should this module be loaded twice.
const hooked = Symbol.for('mcp-kit.testbed.exit-hooks');
if (!(globalThis as Record<symbol, unknown>)[hooked]) {
  (globalThis as Record<symbol, unknown>)[hooked] = true;
  process.once('exit', killLeftovers);
  process.once('SIGTERM', () => {
    killLeftovers();
    process.exit(143);
  });
}

/** A TCP port free on 127.0.0.1 now (another process may take it before it is used). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * A server of a start could not bind the port {@link freePort} gave it: another process took it
 * in between (npm test's lanes start servers at the same time). The start is made again on new ports.
 */
export class PortTaken extends Error {}

/** `PortTaken` if one of `outputs` (a redis-server's log) says its port was taken, else `error`. */
export function portTakenOr(error: unknown, outputs: Array<{ name: string; output: string }>): unknown {
  const taken = outputs.find((o) => /Address already in use/.test(o.output));
  return taken ? new PortTaken(`${taken.name}: its port was taken before it bound it`, { cause: error }) : error;
}

/** Runs `start` again (at most 3 times in all) while it fails with {@link PortTaken}. */
export async function startingOnFreePorts<T>(start: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (error) {
      if (attempt >= 3 || !(error instanceof PortTaken)) throw error;
    }
  }
}

/** Calls `check` every 50 ms until it returns a value other than `undefined` (a throw counts as none); throws `what()` after `timeoutMs`. */
export async function until<T>(check: () => Promise<T | undefined>, timeoutMs: number, what: () => string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(what());
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
