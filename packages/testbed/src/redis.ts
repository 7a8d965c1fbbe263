/**
 * A real redis-server: started on a free port without persistence, stopped by its PID. Missing
 * redis-server is an error that says how to install it.
 */
import { spawnSync, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { existsSync } from 'node:fs';
import { connect } from 'node:net';
import { freePort, isRunning, portTakenOr, PortTaken, startedBy, startProcess, stopProcess } from './processes.js';

/** redis-server on PATH or at /usr/bin/redis-server; throws with the install command otherwise. */
export function redisServerBinary(): string {
  const onPath = spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).stdout.trim();
  if (onPath) return onPath;
  if (existsSync('/usr/bin/redis-server')) return '/usr/bin/redis-server';
  throw new Error(
    'redis-server not found on PATH or at /usr/bin/redis-server. The Redis tests need a real Redis 7: ' +
      'install it with `apt-get update && apt-get install -y redis-server` (Debian/Ubuntu) or `brew install redis` (macOS). ' +
      '.ci/run installs it on CI.',
  );
}

/**
 * Starts `redis-server` (or Sentinel) with `args`. Its process title names what started it
 * (`ps` shows `redis-server 127.0.0.1:PORT started-by:tests/…test.ts>its test`, or the demo's
 * script), so a server found running after a run says where it came from.
 */
export function spawnRedisServer(binary: string, args: readonly string[], options: SpawnOptions = {}): ChildProcess {
  const by = startedBy();
  const title = ['--proc-title-template', `{title} {listen-addr} {server-mode} started-by:${by}`];
  const at = args.indexOf('--port');
  const name = `${args.includes('--sentinel') ? 'redis-sentinel' : 'redis-server'}${at >= 0 ? ` 127.0.0.1:${args[at + 1]}` : ''}`;
  return startProcess(name, binary, [...args, ...title], options);
}

export interface TestRedis {
  url: string;
  port: number;
  /** PID of the running server; changes on restart. */
  readonly pid: number;
  /** SIGKILLs the server (by PID) and waits for it to exit: Redis is down. */
  stop(): Promise<void>;
  /** Starts a new server on the same port: empty, or with what its append-only file kept. */
  start(): Promise<void>;
}

async function waitForPort(port: number, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null)
      throw portTakenOr(new Error(`redis-server exited with ${child.exitCode}:\n${log()}`), [{ name: 'redis-server', output: log() }]);
    // Up when it answers PING (not `-LOADING` while it reads its append-only file), and the server
    // answering must be this one: another redis-server may hold the port.
    const answer = await new Promise<{ pong: boolean; pid: number } | undefined>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      let reply = '';
      socket.once('connect', () => socket.write('PING\r\nINFO server\r\n'));
      socket.on('data', (d) => {
        reply += d.toString();
        const found = /process_id:(\d+)/.exec(reply);
        if (found) {
          socket.destroy();
          resolve({ pong: reply.startsWith('+PONG'), pid: Number(found[1]) });
        }
      });
      socket.once('error', () => resolve(undefined));
      socket.once('close', () => resolve(undefined));
    });
    if (answer && answer.pid !== child.pid) throw new PortTaken(`port ${port} is another redis-server's (pid ${answer.pid})`);
    if (answer?.pong) return;
    if (Date.now() > deadline) throw new Error(`redis-server did not answer on port ${port} within 10 s:\n${log()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Starts redis-server on a free port; call `stop()` in afterAll. With `aofDir`, it keeps an
 * append-only file there, fsynced on every write, so a restart after `stop()` comes back with
 * every acknowledged write; without, a restart comes back empty. `args` go on its command line
 * after these (e.g. `['--maxmemory', '64mb', '--maxmemory-policy', 'volatile-lru']`), at every start.
 */
export async function startRedis(options: { aofDir?: string; args?: readonly string[] } = {}): Promise<TestRedis> {
  const binary = redisServerBinary();
  let port = await freePort();
  let child: ChildProcess | undefined;
  const persistence = options.aofDir ? ['--appendonly', 'yes', '--appendfsync', 'always', '--dir', options.aofDir] : ['--appendonly', 'no'];
  const stop = () => stopProcess(child, 'SIGKILL');
  const launch = async () => {
    // A second server on this port would fail to bind while the first answered the checks, and
    // the first would be left running with nobody holding its PID.
    if (isRunning(child)) throw new Error(`redis-server (pid ${child.pid}) on port ${port} is still running: stop() it first`);
    let output = '';
    const base = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', ...persistence, '--protected-mode', 'no'];
    const c = spawnRedisServer(binary, [...base, ...(options.args ?? [])]);
    c.stdout?.on('data', (d) => (output += d));
    c.stderr?.on('data', (d) => (output += d));
    child = c;
    try {
      await waitForPort(port, c, () => output);
    } catch (error) {
      await stop();
      throw error;
    }
  };
  // A first start that lost its port to another process is made again on another; a restart
  // keeps its port (the instances know it).
  for (let attempt = 1; ; attempt++) {
    try {
      await launch();
      break;
    } catch (error) {
      if (attempt >= 3 || !(error instanceof PortTaken)) throw error;
      port = await freePort();
    }
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    get pid() {
      return child?.pid ?? -1;
    },
    stop,
    async start() {
      await launch();
    },
  };
}
