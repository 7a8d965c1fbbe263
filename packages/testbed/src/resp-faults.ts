/**
 * A fault-injecting proxy in front of a real redis-server: it speaks enough RESP to count the
 * commands each connection sends and answers a chosen share of them itself with an error, in
 * order with Redis' own replies, as a Redis that fails one command (OOM, a failover, a timeout)
 * would. A connection that subscribes is passed through untouched from then on (pushes have no
 * command to pair with). `cut()` drops every connection and refuses new ones until `heal()`.
 * `cutSubscribers`/`blackHoleSubscribers` strike only the connections that subscribed to a channel
 * (a bus subscriber reset, or left half-open, while the client's other connections work).
 */
import { createServer, connect, type Server, type Socket } from 'node:net';

export interface RespFaultProxy {
  url: string;
  port: number;
  /** Share of commands (0..1) answered with an injected error; change it at any time. */
  failRate: number;
  /** Only commands whose name (upper case) this accepts are failed; default all but SUBSCRIBE-like ones. */
  failWhen: (command: string) => boolean;
  /** Commands seen, and those failed, by name. */
  readonly seen: Map<string, number>;
  readonly failed: Map<string, number>;
  /** Drops every connection and refuses new ones (a partition), until `heal()`. */
  cut(): void;
  heal(): void;
  /**
   * Drops every connection whose `SUBSCRIBE` names a channel `match` finds, and drops those that
   * send such a `SUBSCRIBE` from now on (a subscriber's connection reset, and every reconnect of it
   * failing), until `healSubscribers()`. Other connections are untouched. Returns how many it dropped.
   */
  cutSubscribers(match: RegExp): number;
  healSubscribers(): void;
  /**
   * From now on holds every byte, both ways, of the open connections whose `SUBSCRIBE` names a
   * channel `match` finds, and never closes them (a half-open connection: a NAT or a firewall that
   * forgot the flow; neither end hears of it). Connections made later are untouched. Returns how many.
   */
  blackHoleSubscribers(match: RegExp): number;
  /** How many open connections, not black-holed, subscribed to a channel `match` finds. */
  subscribers(match: RegExp): number;
  close(): Promise<void>;
}

/** Byte length of the complete RESP value at `at` in `buf`, or -1 if it is not all there yet. */
function valueLength(buf: Buffer, at: number): number {
  if (at >= buf.length) return -1;
  const lineEnd = buf.indexOf('\r\n', at);
  if (lineEnd < 0) return -1;
  const type = String.fromCharCode(buf[at]!);
  const head = lineEnd + 2 - at;
  if (type === '+' || type === '-' || type === ':') return head;
  const n = Number(buf.toString('latin1', at + 1, lineEnd));
  if (type === '$') {
    if (n < 0) return head;
    return lineEnd + 2 + n + 2 <= buf.length ? head + n + 2 : -1;
  }
  if (type === '*') {
    let length = head;
    for (let i = 0; i < Math.max(n, 0); i++) {
      const item = valueLength(buf, at + length);
      if (item < 0) return -1;
      length += item;
    }
    return length;
  }
  throw new Error(`resp-faults: unexpected RESP type ${JSON.stringify(type)}`);
}

/** The command name of a RESP array of bulk strings (what clients send). */
function commandName(buf: Buffer, at: number): string {
  const first = buf.indexOf('\r\n', at) + 2; // past *<n>
  const nameAt = buf.indexOf('\r\n', first) + 2; // past $<len>
  const len = Number(buf.toString('latin1', first + 1, nameAt - 2));
  return buf.toString('latin1', nameAt, nameAt + len).toUpperCase();
}

const PASS_THROUGH = new Set(['SUBSCRIBE', 'PSUBSCRIBE', 'SSUBSCRIBE', 'MONITOR']);

export async function startRespFaultProxy(redisPort: number, seed = 1): Promise<RespFaultProxy> {
  let random = seed >>> 0 || 1;
  const next = () => {
    // xorshift32: a run's faults are the same for the same seed and traffic.
    random ^= random << 13;
    random ^= random >>> 17;
    random ^= random << 5;
    return (random >>> 0) / 0x1_0000_0000;
  };
  const sockets = new Set<Socket>();
  let partitioned = false;
  /** Subscribed connections: what their first SUBSCRIBE said, how to drop them, whether they are black-holed. */
  const subscribed = new Map<Socket, { command: string; drop: () => void; dead: boolean }>();
  let refuseSubscribe: RegExp | undefined;
  const self: RespFaultProxy = {
    url: '',
    port: 0,
    failRate: 0,
    failWhen: (command) => !PASS_THROUGH.has(command),
    seen: new Map(),
    failed: new Map(),
    cut() {
      partitioned = true;
      for (const s of [...sockets]) s.destroy();
    },
    heal() {
      partitioned = false;
    },
    cutSubscribers(match) {
      refuseSubscribe = match;
      const hit = [...subscribed.values()].filter((s) => match.test(s.command));
      for (const s of hit) s.drop();
      return hit.length;
    },
    healSubscribers() {
      refuseSubscribe = undefined;
    },
    subscribers(match) {
      return [...subscribed.values()].filter((s) => !s.dead && match.test(s.command)).length;
    },
    blackHoleSubscribers(match) {
      const hit = [...subscribed.values()].filter((s) => !s.dead && match.test(s.command));
      for (const s of hit) s.dead = true;
      return hit.length;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of [...sockets]) s.destroy();
        server.close(() => resolve());
      }),
  };
  const count = (map: Map<string, number>, name: string) => map.set(name, (map.get(name) ?? 0) + 1);

  const server: Server = createServer((client) => {
    if (partitioned) return void client.destroy();
    const upstream = connect(redisPort, '127.0.0.1');
    sockets.add(client);
    sockets.add(upstream);
    // Replies owed to the client, in command order: Redis' (filled as they come) or injected ones.
    const owed: Array<{ reply: Buffer | undefined }> = [];
    let fromClient = Buffer.alloc(0);
    let fromRedis = Buffer.alloc(0);
    let passThrough = false;
    /** Set once the connection subscribed (see `subscribed`). */
    let sub: { command: string; drop: () => void; dead: boolean } | undefined;
    const flush = () => {
      while (owed.length > 0 && owed[0]!.reply) client.write(owed.shift()!.reply!);
    };
    client.on('data', (chunk: Buffer) => {
      if (sub?.dead) return;
      if (passThrough) return void upstream.write(chunk);
      fromClient = Buffer.concat([fromClient, chunk]);
      let at = 0;
      for (;;) {
        const length = valueLength(fromClient, at);
        if (length < 0) break;
        const name = commandName(fromClient, at);
        count(self.seen, name);
        if (PASS_THROUGH.has(name)) {
          const command = fromClient.toString('latin1', at, at + length);
          if (refuseSubscribe?.test(command)) return closeBoth();
          sub = { command, drop: () => closeBoth(), dead: false };
          subscribed.set(client, sub);
          // From here on, replies are pushes: forward the rest as it is.
          passThrough = true;
          upstream.write(fromClient.subarray(at));
          fromClient = Buffer.alloc(0);
          return;
        }
        if (self.failWhen(name) && next() < self.failRate) {
          count(self.failed, name);
          owed.push({ reply: Buffer.from(`-ERR injected fault (${name})\r\n`) });
        } else {
          owed.push({ reply: undefined });
          upstream.write(fromClient.subarray(at, at + length));
        }
        at += length;
      }
      fromClient = fromClient.subarray(at);
      flush();
    });
    upstream.on('data', (chunk: Buffer) => {
      if (sub?.dead) return;
      if (passThrough && owed.length === 0) return void client.write(chunk);
      fromRedis = Buffer.concat([fromRedis, chunk]);
      let at = 0;
      for (;;) {
        const length = valueLength(fromRedis, at);
        if (length < 0) break;
        const slot = owed.find((o) => o.reply === undefined);
        const reply = fromRedis.subarray(at, at + length);
        if (slot) slot.reply = Buffer.from(reply);
        else client.write(reply); // a push on a connection that just subscribed
        at += length;
      }
      fromRedis = fromRedis.subarray(at);
      flush();
    });
    function closeBoth(): void {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
      subscribed.delete(client);
    }
    client.on('error', closeBoth);
    upstream.on('error', closeBoth);
    client.on('close', closeBoth);
    upstream.on('close', closeBoth);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  self.port = port;
  self.url = `redis://127.0.0.1:${port}`;
  return self;
}
