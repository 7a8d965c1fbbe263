/**
 * A fault-injecting proxy in front of a real redis-server: it speaks enough RESP (2 and 3) to count the
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
  /**
   * Sends `push`, one RESP3 push (`>…`), to every open connection that has not subscribed, after the
   * replies Redis sent it so far, as Redis sends an out-of-band notification (a maintenance notice, a
   * client-side caching invalidation). Returns how many connections it went to.
   */
  notify(push: string): number;
  /** How many open connections, not black-holed, subscribed to a channel `match` finds. */
  subscribers(match: RegExp): number;
  close(): Promise<void>;
}

/** RESP types whose value is the rest of their first line: RESP2's simple string, error and integer; RESP3's null, boolean, double and big number. */
const LINE_TYPES = new Set(['+', '-', ':', '_', '#', ',', '(']);
/** RESP types with a byte length and that many bytes: RESP2's bulk string; RESP3's blob error and verbatim string (`txt:` first). */
const BLOB_TYPES = new Set(['$', '!', '=']);
/** Aggregates of `n` values: RESP2's array; RESP3's set and push. */
const LIST_TYPES = new Set(['*', '~', '>']);
/** Aggregates of `n` key-value pairs: RESP3's map, and the attribute, which describes the value that follows it. */
const PAIR_TYPES = new Set(['%', '|']);

/**
 * Byte length of the complete RESP2 or RESP3 value at `at` in `buf`, or -1 if it is not all there
 * yet. An attribute (`|`) counts with the value it describes, as one value. Throws on a byte that
 * starts no RESP type, and on RESP3's streamed strings and aggregates (`$?`, `*?`), which Redis never sends.
 */
export function respValueLength(buf: Buffer, at: number): number {
  if (at >= buf.length) return -1;
  const lineEnd = buf.indexOf('\r\n', at);
  if (lineEnd < 0) return -1;
  const type = String.fromCharCode(buf[at]!);
  const head = lineEnd + 2 - at;
  if (LINE_TYPES.has(type)) return head;
  const items = LIST_TYPES.has(type) ? 1 : PAIR_TYPES.has(type) ? 2 : BLOB_TYPES.has(type) ? 0 : undefined;
  if (items === undefined) throw new Error(`resp-faults: unexpected RESP type ${JSON.stringify(type)}`);
  const size = buf.toString('latin1', at + 1, lineEnd);
  const n = Number(size);
  if (!Number.isInteger(n)) throw new Error(`resp-faults: unexpected length ${JSON.stringify(size)} of RESP type ${JSON.stringify(type)}`);
  if (items === 0) {
    if (n < 0) return head; // RESP2's null bulk string
    return lineEnd + 2 + n + 2 <= buf.length ? head + n + 2 : -1;
  }
  let length = head;
  // An attribute's pairs, then the value it is about.
  for (let i = 0; i < Math.max(items * n, 0) + (type === '|' ? 1 : 0); i++) {
    const item = respValueLength(buf, at + length);
    if (item < 0) return -1;
    length += item;
  }
  return length;
}

/** Whether the complete value at `at` is a RESP3 push (out of band: no command's reply), past any attribute before it. */
function isPush(buf: Buffer, at: number): boolean {
  let value = at;
  while (buf[value] === 0x7c /* | */) {
    const lineEnd = buf.indexOf('\r\n', value);
    let length = lineEnd + 2 - value;
    for (let i = 0; i < 2 * Number(buf.toString('latin1', value + 1, lineEnd)); i++) length += respValueLength(buf, value + length);
    value += length;
  }
  return buf[value] === 0x3e; /* > */
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
  /** Every open connection, for `notify`. */
  const connections = new Set<{ notify: (push: Buffer) => boolean }>();
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
    notify(push) {
      const frame = Buffer.from(push, 'latin1');
      if (respValueLength(frame, 0) !== frame.length || !isPush(frame, 0))
        throw new Error(`resp-faults: not one RESP3 push: ${JSON.stringify(push)}`);
      let sent = 0;
      for (const c of connections) if (c.notify(frame)) sent++;
      return sent;
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
    /** A RESP3 push goes to the client after the replies Redis sent before it, not in a command's place. */
    const outOfBand = (push: Buffer) => {
      const pending = owed.findIndex((o) => o.reply === undefined);
      owed.splice(pending < 0 ? owed.length : pending, 0, { reply: push });
      flush();
    };
    const plain = {
      notify: (push: Buffer) => {
        if (sub) return false;
        outOfBand(push);
        return true;
      },
    };
    connections.add(plain);
    client.on('data', (chunk: Buffer) => {
      if (sub?.dead) return;
      if (passThrough) return void upstream.write(chunk);
      fromClient = Buffer.concat([fromClient, chunk]);
      let at = 0;
      for (;;) {
        const length = respValueLength(fromClient, at);
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
        const length = respValueLength(fromRedis, at);
        if (length < 0) break;
        const reply = Buffer.from(fromRedis.subarray(at, at + length));
        const slot = owed.find((o) => o.reply === undefined);
        if (isPush(fromRedis, at)) outOfBand(reply);
        else if (slot) slot.reply = reply;
        else client.write(reply); // a RESP2 message on a connection that just subscribed
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
      connections.delete(plain);
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
