/**
 * A bad network between the instances and a real redis-server, for the fault battery:
 * a plain TCP proxy (it does not read RESP) that can
 * - delay every chunk by a random 0..`delayMs` ms, each direction of a connection keeping its byte
 *   order (a chunk never overtakes the one before it);
 * - reset one random connection every N ms (an RST both ways, as a NAT or a load balancer that
 *   drops a flow does), or one now;
 * - black-hole: hold every byte of every connection, open or new, in both directions, without
 *   closing anything, for T ms (a partition with no RST: the kernel still accepts new connections,
 *   but no byte gets through, so a client sees a connection that never answers), then reset every
 *   connection it held.
 * The randomness comes from a seed (random.ts), so a run's choices repeat.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import { Rng } from './random.js';

export interface NetFaultProxy {
  url: string;
  port: number;
  /** Each chunk waits a random 0..delayMs ms before it is passed on (0: none). Change it at any time. */
  delayMs: number;
  /** Resets one random open connection every `everyMs` ms from now on; `0` stops. */
  resetEvery(everyMs: number): void;
  /** Resets one random open connection now; `false` when none was open. */
  resetOne(): boolean;
  /**
   * Holds every byte, both ways, of every connection (and of those made meanwhile) for `ms`, then
   * resets all of them. Resolves once they are reset.
   */
  blackHole(ms: number): Promise<void>;
  /** Whether a black hole is on now. */
  readonly holding: boolean;
  /** Connections open now. */
  readonly open: number;
  readonly stats: { connections: number; resets: number; chunks: number; held: number };
  close(): Promise<void>;
}

/** One direction of a connection: chunks wait in order until they are due and nothing holds them. */
class Lane {
  private readonly queue: Array<{ chunk: Buffer; due: number }> = [];
  private lastDue = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly to: Socket,
    private readonly held: () => boolean,
  ) {}

  push(chunk: Buffer, delayMs: number): void {
    // Never before the chunk ahead of it: byte order holds per direction.
    this.lastDue = Math.max(Date.now() + delayMs, this.lastDue);
    this.queue.push({ chunk, due: this.lastDue });
    this.pump();
  }

  pump(): void {
    if (this.timer || this.held()) return;
    const now = Date.now();
    while (this.queue.length > 0 && this.queue[0]!.due <= now) {
      const { chunk } = this.queue.shift()!;
      if (!this.to.destroyed) this.to.write(chunk);
    }
    const next = this.queue[0];
    if (next)
      this.timer = setTimeout(() => {
        this.timer = undefined;
        this.pump();
      }, next.due - now);
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.queue.length = 0;
  }
}

interface Link {
  client: Socket;
  upstream: Socket;
  lanes: Lane[];
  /** Under a black hole: nothing passes until it is reset. */
  held: boolean;
}

/** A proxy to the redis-server on `redisPort` (plain TCP: works for any protocol). */
export async function startNetFaultProxy(redisPort: number, seed = 1): Promise<NetFaultProxy> {
  const rng = new Rng(seed);
  const links = new Set<Link>();
  const stats = { connections: 0, resets: 0, chunks: 0, held: 0 };
  let holding = false;
  let resetTimer: ReturnType<typeof setInterval> | undefined;

  const reset = (link: Link) => {
    if (!links.delete(link)) return;
    for (const lane of link.lanes) lane.stop();
    // An RST each way, as the network would: no FIN, bytes in flight are lost.
    for (const s of [link.client, link.upstream]) {
      if (s.destroyed) continue;
      if (s.connecting || s.readyState === 'closed') s.destroy();
      else s.resetAndDestroy();
    }
  };

  const server: Server = createServer((client) => {
    stats.connections++;
    const upstream = connect(redisPort, '127.0.0.1');
    const link: Link = { client, upstream, lanes: [], held: holding };
    if (link.held) stats.held++;
    const held = () => link.held;
    const up = new Lane(upstream, held);
    const down = new Lane(client, held);
    link.lanes.push(up, down);
    links.add(link);
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    client.on('data', (chunk: Buffer) => {
      stats.chunks++;
      up.push(chunk, self.delayMs > 0 ? rng.int(0, self.delayMs) : 0);
    });
    upstream.on('data', (chunk: Buffer) => {
      stats.chunks++;
      down.push(chunk, self.delayMs > 0 ? rng.int(0, self.delayMs) : 0);
    });
    const closeBoth = () => {
      if (!links.delete(link)) return;
      for (const lane of link.lanes) lane.stop();
      client.destroy();
      upstream.destroy();
    };
    for (const s of [client, upstream]) {
      s.on('error', closeBoth);
      // A close from either end is passed on once the bytes ahead of it would have been: at once
      // here (the tests' faults are resets, not orderly closes).
      s.on('close', closeBoth);
    }
  });

  const self: NetFaultProxy = {
    url: '',
    port: 0,
    delayMs: 0,
    resetEvery(everyMs) {
      if (resetTimer) clearInterval(resetTimer);
      resetTimer = everyMs > 0 ? setInterval(() => self.resetOne(), everyMs) : undefined;
    },
    resetOne() {
      const open = [...links];
      if (open.length === 0) return false;
      stats.resets++;
      reset(rng.pick(open));
      return true;
    },
    async blackHole(ms) {
      holding = true;
      for (const link of links) {
        link.held = true;
        stats.held++;
      }
      await new Promise((resolve) => setTimeout(resolve, ms));
      holding = false;
      for (const link of [...links]) {
        if (!link.held) continue;
        stats.resets++;
        reset(link);
      }
    },
    get holding() {
      return holding;
    },
    get open() {
      return links.size;
    },
    stats,
    close: () =>
      new Promise<void>((resolve) => {
        self.resetEvery(0);
        for (const link of [...links]) reset(link);
        server.close(() => resolve());
      }),
  };
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  self.port = port;
  self.url = `redis://127.0.0.1:${port}`;
  return self;
}
