/**
 * A real Redis Cluster on loopback: 3 masters and 3 replicas of `redis-server --cluster-enabled
 * yes`, each node in a directory of its own (its `nodes.conf`) with its own `--cluster-port`,
 * joined by `redis-cli --cluster create … --cluster-replicas 1`. Every process is started here and
 * stopped by its PID. Helpers for the faults the tests bring: a node killed, paused past
 * `cluster-node-timeout`, restarted (empty: no persistence), the master of a slot found, and a
 * slot moved to another master while it is used (by hand, with `ASK` redirections in flight, or
 * by `redis-cli --cluster reshard`).
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, isRunning, portTakenOr, startingOnFreePorts, startProcess, stopProcess, until } from './processes.js';
import { redisCommand } from './redis-command.js';
import { redisServerBinary, spawnRedisServer } from './redis.js';

/** How long a node may be unreachable before the others count it failed (`--cluster-node-timeout`). */
export const CLUSTER_NODE_TIMEOUT_MS = 2_000;

export interface ClusterNode {
  /** `node-0` … `node-5`, in the order they were started (the first three are the masters at creation). */
  readonly name: string;
  readonly port: number;
  /** Its cluster bus port (`--cluster-port`). */
  readonly busPort: number;
  /** Its PID now (changes on restart); `-1` while it is stopped. */
  readonly pid: number;
  readonly running: boolean;
}

/** A node as `CLUSTER NODES` describes it. */
export interface NodeState {
  id: string;
  port: number;
  master: boolean;
  /** `fail` or `fail?` among its flags. */
  failing: boolean;
  /** Its master's id (a replica), `-` for a master. */
  masterId: string;
  /** The slots it serves (a master), expanded. */
  slots: number[];
}

export interface TestRedisCluster {
  readonly nodes: readonly ClusterNode[];
  /** The first node's URL and port (a look at one node; the cluster is all of them). */
  readonly url: string;
  readonly port: number;
  /** The first node's PID. */
  readonly pid: number;
  /** SIGKILLs every node (by PID): the whole cluster is down. */
  stop(): Promise<void>;
  /** Starts every stopped node again on its port, with its `nodes.conf` (and append-only file, if it keeps one), and resolves once the cluster settled. */
  start(): Promise<void>;
  /** `127.0.0.1:<port>,…` of every node: the example apps' `REDIS_CLUSTER_NODES`. */
  readonly nodesEnv: string;
  /** `[{ host, port }]` of every node, as ioredis' `Cluster` takes them. */
  readonly seeds: Array<{ host: string; port: number }>;
  /** The node on `port`. */
  node(port: number): ClusterNode;
  /** What a running node says of every node (`CLUSTER NODES`). */
  topology(): Promise<NodeState[]>;
  /** The masters serving slots now. */
  masters(): Promise<ClusterNode[]>;
  /** The slot of `key` (`CLUSTER KEYSLOT`). */
  slotOf(key: string): Promise<number>;
  /** The master serving `slot` now. */
  masterOf(slot: number): Promise<ClusterNode>;
  /** SIGKILLs the node (by PID) and resolves once it has exited. */
  kill(node: ClusterNode): Promise<void>;
  /** SIGSTOP: the node holds its connections and answers nothing. */
  pause(node: ClusterNode): void;
  /** SIGCONT after {@link pause}. */
  resume(node: ClusterNode): void;
  /** Starts a stopped node again on its port, with its `nodes.conf` and no data. */
  restart(node: ClusterNode): Promise<void>;
  /** Resolves with the master that serves `slot` once it is another node than `from` and every running node reports `cluster_state:ok`. */
  failedOver(from: ClusterNode, slot: number, timeoutMs?: number): Promise<ClusterNode>;
  /** Resolves once every running node reports `cluster_state:ok` and agrees on who serves every slot. */
  settled(timeoutMs?: number): Promise<void>;
  /**
   * Moves `slot` to master `to` while clients use it, as `redis-cli --cluster reshard` does it,
   * step by step: `SETSLOT IMPORTING` on `to`, `SETSLOT MIGRATING` on the owner (from then on the
   * owner answers `ASK` for a key it does not hold), its keys `MIGRATE`d a batch at a time with
   * `betweenBatches` awaited after each (ASK redirections in flight), then `SETSLOT NODE` on every
   * master. Resolves with how many keys moved.
   */
  migrateSlot(slot: number, to: ClusterNode, options?: { batch?: number; betweenBatches?: () => Promise<void> }): Promise<number>;
  /** `redis-cli --cluster reshard`: `count` slots from master `from` to master `to`. */
  reshard(from: ClusterNode, to: ClusterNode, count: number): Promise<void>;
  /** What every process printed, for failure messages. */
  output(): string;
  /** Stops every node (SIGKILL, by PID) and removes their directories. */
  close(): Promise<void>;
}

/** `CLUSTER NODES` parsed: `<id> <ip:port@bus> <flags> <master> <ping> <pong> <epoch> <link> <slot>…`. */
export function parseClusterNodes(text: string): NodeState[] {
  const nodes: NodeState[] = [];
  for (const line of text.split('\n')) {
    const parts = line.trim().split(' ');
    if (parts.length < 8) continue;
    const [id, address, flags, masterId] = parts as [string, string, string, string];
    const port = Number(/:(\d+)@/.exec(address)?.[1]);
    const slots: number[] = [];
    for (const range of parts.slice(8)) {
      if (range.startsWith('[')) continue; // a slot migrating or importing: still its owner's
      const [first, last = first] = range.split('-').map(Number) as [number, number?];
      for (let s = first; s <= last!; s++) slots.push(s);
    }
    const flagList = flags.split(',');
    nodes.push({
      id,
      port,
      master: flagList.includes('master'),
      failing: flagList.includes('fail') || flagList.includes('fail?'),
      masterId,
      slots,
    });
  }
  return nodes;
}

/**
 * Starts `masters` masters (3) and `replicas` replicas of each (1) and creates the cluster; resolves once
 * every node reports `cluster_state:ok` and agrees on who serves every slot.
 */
export function startRedisCluster(options: RedisClusterOptions = {}): Promise<TestRedisCluster> {
  return startingOnFreePorts(() => startRedisClusterOnce(options));
}

interface RedisClusterOptions {
  masters?: number;
  /** Replicas of each master (default 1; 0: masters only, as a benchmark against one redis-server without replica wants). */
  replicas?: number;
  /** Each node keeps an append-only file (fsynced on every write): a restart comes back with what it acknowledged. */
  appendOnly?: boolean;
  /** More of each node's command line, at every start (e.g. `['--maxmemory', '64mb']`). */
  args?: readonly string[];
}

async function startRedisClusterOnce(options: RedisClusterOptions): Promise<TestRedisCluster> {
  const masterCount = options.masters ?? 3;
  const replicas = options.replicas ?? 1;
  const binary = redisServerBinary();
  const root = mkdtempSync(join(tmpdir(), 'mcp-kit-redis-cluster-'));
  const procs: Array<{ node: ClusterNode; child: ChildProcess | undefined; output: string; dir: string }> = [];
  const output = () => procs.map((p) => `--- ${p.node.name} :${p.node.port} (pid ${p.node.pid}) ---\n${p.output.slice(-2_000)}`).join('\n');

  const launch = (p: (typeof procs)[number]) => {
    const args = [
      '--port',
      String(p.node.port),
      '--bind',
      '127.0.0.1',
      '--protected-mode',
      'no',
      '--cluster-enabled',
      'yes',
      '--cluster-config-file',
      'nodes.conf',
      '--cluster-node-timeout',
      String(CLUSTER_NODE_TIMEOUT_MS),
      '--cluster-port',
      String(p.node.busPort),
      '--save',
      '',
      ...(options.appendOnly ? ['--appendonly', 'yes', '--appendfsync', 'always'] : ['--appendonly', 'no']),
      '--repl-diskless-sync-delay',
      '0',
      ...(options.args ?? []),
    ];
    const child = spawnRedisServer(binary, args, { cwd: p.dir });
    child.stdout?.on('data', (d) => (p.output += d));
    child.stderr?.on('data', (d) => (p.output += d));
    p.child = child;
  };
  const ping = async (port: number) => ((await redisCommand(port, 'PING')) === 'PONG' ? true : undefined);
  const running = () => procs.filter((p) => isRunning(p.child) && !paused.has(p.node.port));
  const paused = new Set<number>();
  const close = async () => {
    for (const p of procs) {
      if (paused.has(p.node.port) && isRunning(p.child)) process.kill(p.child.pid as number, 'SIGCONT');
      await stopProcess(p.child, 'SIGKILL');
    }
    rmSync(root, { recursive: true, force: true });
  };

  try {
    for (let i = 0; i < masterCount * (1 + replicas); i++) {
      const dir = join(root, `node-${i}`);
      mkdirSync(dir);
      const port = await freePort();
      let busPort = await freePort();
      while (busPort === port) busPort = await freePort();
      const entry: (typeof procs)[number] = { node: undefined as unknown as ClusterNode, child: undefined, output: '', dir };
      entry.node = {
        name: `node-${i}`,
        port,
        busPort,
        get pid() {
          return isRunning(entry.child) ? (entry.child.pid ?? -1) : -1;
        },
        get running() {
          return isRunning(entry.child);
        },
      };
      procs.push(entry);
      launch(entry);
    }
    for (const p of procs)
      await until(
        () => ping(p.node.port),
        10_000,
        () => `${p.node.name} did not answer:\n${output()}`,
      );
    const create = startProcess('redis-cli --cluster create', 'redis-cli', [
      '--cluster',
      'create',
      ...procs.map((p) => `127.0.0.1:${p.node.port}`),
      '--cluster-replicas',
      String(replicas),
      '--cluster-yes',
    ]);
    let created = '';
    create.stdout?.on('data', (d) => (created += d));
    create.stderr?.on('data', (d) => (created += d));
    const code = await new Promise<number | null>((resolve) => create.once('exit', resolve));
    if (code !== 0) throw new Error(`redis-cli --cluster create exited ${code}:\n${created}\n${output()}`);
  } catch (error) {
    await close();
    throw portTakenOr(
      error,
      procs.map((p) => ({ name: p.node.name, output: p.output })),
    );
  }

  const byPort = (port: number) => {
    const found = procs.find((p) => p.node.port === port);
    if (!found) throw new Error(`no node on port ${port}`);
    return found;
  };
  const topology = async () => {
    for (const p of running()) {
      try {
        return parseClusterNodes(String(await redisCommand(p.node.port, 'CLUSTER', 'NODES')));
      } catch {
        // the next running node
      }
    }
    throw new Error(`no running node answered CLUSTER NODES:\n${output()}`);
  };
  /** Every running node's view of who serves each slot, and whether they agree with state ok. */
  const agreed = async () => {
    const views = await Promise.all(
      running().map(async (p) => {
        const info = String(await redisCommand(p.node.port, 'CLUSTER', 'INFO'));
        if (!/cluster_state:ok/.test(info)) return undefined;
        const nodes = parseClusterNodes(String(await redisCommand(p.node.port, 'CLUSTER', 'NODES')));
        const owner = new Array<number>(16384).fill(-1);
        for (const n of nodes) if (n.master && !n.failing) for (const s of n.slots) owner[s] = n.port;
        return owner.join(',');
      }),
    );
    if (views.some((v) => v === undefined || v.includes('-1'))) return undefined;
    return views.every((v) => v === views[0]) ? true : undefined;
  };
  const settled = async (timeoutMs = 20_000) => {
    await until(agreed, timeoutMs, () => `the cluster did not settle (state ok, one owner per slot) within ${timeoutMs} ms:\n${output()}`);
  };
  const masterOf = async (slot: number) => {
    const owner = (await topology()).find((n) => n.master && !n.failing && n.slots.includes(slot));
    if (!owner) throw new Error(`no master serves slot ${slot}`);
    return byPort(owner.port).node;
  };
  const idOf = async (port: number) => String(await redisCommand(port, 'CLUSTER', 'MYID'));

  await settled();

  const first = procs[0]!.node;
  const cluster: TestRedisCluster = {
    nodes: procs.map((p) => p.node),
    url: `redis://127.0.0.1:${first.port}`,
    port: first.port,
    get pid() {
      return first.pid;
    },
    async stop() {
      for (const p of procs) {
        if (paused.delete(p.node.port) && isRunning(p.child)) process.kill(p.child.pid as number, 'SIGCONT');
        await stopProcess(p.child, 'SIGKILL');
      }
    },
    async start() {
      for (const p of procs) if (!isRunning(p.child)) launch(p);
      for (const p of procs)
        await until(
          () => ping(p.node.port),
          10_000,
          () => `${p.node.name} did not answer after its restart:\n${output()}`,
        );
      await settled(30_000);
    },
    nodesEnv: procs.map((p) => `127.0.0.1:${p.node.port}`).join(','),
    seeds: procs.map((p) => ({ host: '127.0.0.1', port: p.node.port })),
    node: (port) => byPort(port).node,
    topology,
    async masters() {
      const ports = (await topology()).filter((n) => n.master && !n.failing && n.slots.length > 0).map((n) => n.port);
      return ports.map((port) => byPort(port).node);
    },
    async slotOf(key) {
      return Number(await redisCommand(running()[0]!.node.port, 'CLUSTER', 'KEYSLOT', key));
    },
    masterOf,
    async kill(node) {
      await stopProcess(byPort(node.port).child, 'SIGKILL');
    },
    pause(node) {
      const p = byPort(node.port);
      if (!isRunning(p.child)) throw new Error(`${node.name} is not running`);
      paused.add(node.port);
      process.kill(p.child.pid as number, 'SIGSTOP');
    },
    resume(node) {
      const p = byPort(node.port);
      if (!paused.delete(node.port) || !isRunning(p.child)) return;
      process.kill(p.child.pid as number, 'SIGCONT');
    },
    async restart(node) {
      const p = byPort(node.port);
      if (isRunning(p.child)) throw new Error(`${node.name} (pid ${p.child.pid}) is still running: kill() it first`);
      launch(p);
      await until(
        () => ping(node.port),
        10_000,
        () => `${node.name} did not answer after its restart:\n${output()}`,
      );
    },
    async failedOver(from, slot, timeoutMs = 30_000) {
      const port = await until(
        async () => {
          const owner = await masterOf(slot);
          return owner.port !== from.port && (await agreed()) === true ? owner.port : undefined;
        },
        timeoutMs,
        () => `no replica of ${from.name} took slot ${slot} over within ${timeoutMs} ms:\n${output()}`,
      );
      return byPort(port).node;
    },
    settled,
    async migrateSlot(slot, to, { batch = 10, betweenBatches } = {}) {
      const from = await masterOf(slot);
      if (from.port === to.port) return 0;
      const [fromId, toId] = [await idOf(from.port), await idOf(to.port)];
      await redisCommand(to.port, 'CLUSTER', 'SETSLOT', slot, 'IMPORTING', fromId);
      await redisCommand(from.port, 'CLUSTER', 'SETSLOT', slot, 'MIGRATING', toId);
      let moved = 0;
      for (;;) {
        const keys = (await redisCommand(from.port, 'CLUSTER', 'GETKEYSINSLOT', slot, batch)) as string[];
        if (keys.length === 0) break;
        await redisCommand(from.port, 'MIGRATE', '127.0.0.1', to.port, '', 0, 5_000, 'KEYS', ...keys);
        moved += keys.length;
        await betweenBatches?.();
      }
      // The new owner first (it then answers for the slot), then the old one, then every other master.
      await redisCommand(to.port, 'CLUSTER', 'SETSLOT', slot, 'NODE', toId);
      await redisCommand(from.port, 'CLUSTER', 'SETSLOT', slot, 'NODE', toId);
      for (const m of await cluster.masters())
        if (m.port !== to.port && m.port !== from.port)
          await redisCommand(m.port, 'CLUSTER', 'SETSLOT', slot, 'NODE', toId).catch(() => {});
      return moved;
    },
    async reshard(from, to, count) {
      const [fromId, toId] = [await idOf(from.port), await idOf(to.port)];
      const child = startProcess('redis-cli --cluster reshard', 'redis-cli', [
        '--cluster',
        'reshard',
        `127.0.0.1:${from.port}`,
        '--cluster-from',
        fromId,
        '--cluster-to',
        toId,
        '--cluster-slots',
        String(count),
        '--cluster-yes',
        '--cluster-pipeline',
        '10',
      ]);
      let text = '';
      child.stdout?.on('data', (d) => (text += d));
      child.stderr?.on('data', (d) => (text += d));
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
      if (code !== 0) throw new Error(`redis-cli --cluster reshard exited ${code}:\n${text.slice(-3_000)}`);
    },
    output,
    close,
  };
  return cluster;
}
