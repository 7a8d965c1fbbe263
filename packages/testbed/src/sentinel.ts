/**
 * A Redis primary, its replica and three Sentinels, all from the same `redis-server` binary, on free
 * ports, for failover tests. Each Sentinel has its own config file (Sentinel rewrites it)
 * in a temporary directory. Every process is started here and stopped by its PID.
 *
 * With `replicationLagMs`, everyone reaches the primary through a relay that holds what the primary
 * sends its replica for that long (asynchronous replication over a slow link): when the primary is
 * killed, what it had acknowledged in its last `replicationLagMs` never reaches the replica, and the
 * promoted replica lacks it.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, portTakenOr, startingOnFreePorts, stopProcess, until } from './processes.js';
import { redisCommand, type RedisReply } from './redis-command.js';
import { redisServerBinary, spawnRedisServer } from './redis.js';

/** The name the Sentinels monitor the primary under. */
export const SENTINEL_NAME = 'mymaster';

export interface TestSentinels {
  /** The primary's port now, as the Sentinels report it (the replica's after a failover). */
  primaryPort(): Promise<number>;
  /** Port of the primary the set started with, and of its replica. */
  readonly firstPrimaryPort: number;
  readonly replicaPort: number;
  readonly sentinelPorts: number[];
  /** `127.0.0.1:<port>,…` of the Sentinels: the example apps' `REDIS_SENTINELS`. */
  readonly sentinelsEnv: string;
  /** SIGKILLs the primary (by PID) and resolves once it has exited. */
  killPrimary(): Promise<void>;
  /** Resolves with the new primary's port once every Sentinel names one other than the first; rejects after `timeoutMs`. */
  promoted(timeoutMs?: number): Promise<number>;
  /** What every process printed, for failure messages. */
  output(): string;
  /** Stops every process (SIGKILL, by PID) and removes the temporary directory. */
  close(): Promise<void>;
}

interface Proc {
  name: string;
  child: ChildProcess;
  output: string;
}

/**
 * A TCP relay to the primary on `port`. What the primary sends a connection that asked for its
 * replication stream (`PSYNC`/`SYNC`) is held `lagMs` before it is passed on, in order; every other
 * connection (Sentinels, the instances) passes at once. `cut()` destroys every connection at once,
 * with what it held, and refuses new ones: the primary is gone.
 */
async function replicationRelay(port: number, lagMs: number): Promise<{ port: number; cut(): void; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  let cut = false;
  const server: Server = createServer((down) => {
    if (cut) return void down.destroy();
    const up = connect(port, '127.0.0.1');
    sockets.add(down).add(up);
    let replication = false;
    const end = () => {
      down.destroy();
      up.destroy();
      sockets.delete(down);
      sockets.delete(up);
    };
    down.on('data', (chunk: Buffer) => {
      if (/\b(P?SYNC)\b/i.test(chunk.toString('latin1'))) replication = true;
      up.write(chunk);
    });
    up.on('data', (chunk: Buffer) => {
      if (!replication) return void down.write(chunk);
      const timer = setTimeout(() => down.writable && down.write(chunk), lagMs);
      timer.unref?.();
    });
    for (const s of [down, up]) {
      s.on('error', end);
      s.on('close', end);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    cut() {
      cut = true;
      for (const s of sockets) s.destroy();
      sockets.clear();
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** A flat `[k, v, k, v…]` reply (SENTINEL MASTER, SENTINEL REPLICAS' entries) as a map. */
function fields(reply: RedisReply): Map<string, string> {
  const flat = Array.isArray(reply) ? reply : [];
  const map = new Map<string, string>();
  for (let i = 0; i + 1 < flat.length; i += 2) map.set(String(flat[i]), String(flat[i + 1]));
  return map;
}

/**
 * Starts the primary, the replica (`--replicaof`) and three Sentinels (quorum 2,
 * `down-after-milliseconds` 1000, `failover-timeout` 5000), and resolves once the replica is in
 * sync and every Sentinel knows the replica and the two other Sentinels: a failover can happen.
 */
export function startSentinels(options: { replicationLagMs?: number } = {}): Promise<TestSentinels> {
  return startingOnFreePorts(() => startSentinelsOnce(options));
}

async function startSentinelsOnce(options: { replicationLagMs?: number }): Promise<TestSentinels> {
  const binary = redisServerBinary();
  const dir = mkdtempSync(join(tmpdir(), 'mcp-kit-sentinel-'));
  const procs: Proc[] = [];
  const launch = (name: string, args: string[]): Proc => {
    const child = spawnRedisServer(binary, args, { cwd: dir });
    const proc: Proc = { name, child, output: '' };
    child.stdout?.on('data', (d) => (proc.output += d));
    child.stderr?.on('data', (d) => (proc.output += d));
    procs.push(proc);
    return proc;
  };
  const output = () => procs.map((p) => `--- ${p.name} (pid ${p.child.pid}) ---\n${p.output.slice(-3_000)}`).join('\n');
  const stop = (proc: Proc) => stopProcess(proc.child, 'SIGKILL');
  let relay: Awaited<ReturnType<typeof replicationRelay>> | undefined;
  const close = async () => {
    relay?.cut();
    await relay?.close();
    for (const p of procs) await stop(p);
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    const primaryPort = await freePort();
    const replicaPort = await freePort();
    const sentinelPorts = [await freePort(), await freePort(), await freePort()];
    const server = (port: number) => [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--protected-mode',
      'no',
    ];
    const primary = launch('primary', server(primaryPort));
    // The address everyone knows the primary by: its own port, or the relay's.
    let knownPort = primaryPort;
    if (options.replicationLagMs !== undefined) {
      relay = await replicationRelay(primaryPort, options.replicationLagMs);
      knownPort = relay.port;
    }
    launch('replica', [...server(replicaPort), '--replicaof', '127.0.0.1', String(knownPort)]);
    await until(async () => ((await redisCommand(primaryPort, 'PING')) === 'PONG' ? true : undefined), 10_000, output);
    // The replica is in sync before the Sentinels start: the failover has something to promote.
    await until(
      async () => (/master_link_status:up/.test(String(await redisCommand(replicaPort, 'INFO', 'replication'))) ? true : undefined),
      10_000,
      () => `the replica did not sync:\n${output()}`,
    );
    for (const [i, port] of sentinelPorts.entries()) {
      const conf = join(dir, `sentinel-${i}.conf`);
      writeFileSync(
        conf,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          'protected-mode no',
          `dir ${dir}`,
          `sentinel monitor ${SENTINEL_NAME} 127.0.0.1 ${knownPort} 2`,
          `sentinel down-after-milliseconds ${SENTINEL_NAME} 1000`,
          `sentinel failover-timeout ${SENTINEL_NAME} 5000`,
          `sentinel parallel-syncs ${SENTINEL_NAME} 1`,
          '',
        ].join('\n'),
      );
      launch(`sentinel-${i}`, [conf, '--sentinel']);
    }
    // Sentinels find each other through the primary's hello channel (every 2 s) and the replica
    // through the primary's INFO (every 10 s, and at once when they connect).
    for (const port of sentinelPorts) {
      await until(
        async () => {
          const master = fields(await redisCommand(port, 'SENTINEL', 'MASTER', SENTINEL_NAME));
          return master.get('num-other-sentinels') === '2' && master.get('num-slaves') === '1' ? true : undefined;
        },
        20_000,
        () => `sentinel on ${port} did not see its peers and the replica:\n${output()}`,
      );
    }
    const primaryPortNow = async (port: number) => {
      const reply = await redisCommand(port, 'SENTINEL', 'GET-MASTER-ADDR-BY-NAME', SENTINEL_NAME);
      return Array.isArray(reply) ? Number(reply[1]) : undefined;
    };
    return {
      firstPrimaryPort: knownPort,
      replicaPort,
      sentinelPorts,
      sentinelsEnv: sentinelPorts.map((p) => `127.0.0.1:${p}`).join(','),
      primaryPort: async () => (await primaryPortNow(sentinelPorts[0]!)) ?? knownPort,
      async killPrimary() {
        await stop(primary);
        relay?.cut();
      },
      async promoted(timeoutMs = 30_000) {
        return until(
          async () => {
            const ports = await Promise.all(sentinelPorts.map(primaryPortNow));
            return ports.every((p) => p === replicaPort) ? replicaPort : undefined;
          },
          timeoutMs,
          () => `the Sentinels did not promote the replica within ${timeoutMs} ms:\n${output()}`,
        );
      },
      output,
      close,
    };
  } catch (error) {
    await close();
    throw portTakenOr(error, procs);
  }
}
