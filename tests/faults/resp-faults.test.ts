/**
 * The Redis fault proxy (packages/testbed/src/resp-faults.ts) reads RESP to pair each command with its
 * reply. ioredis 6 speaks RESP3 (`HELLO 3`), whose replies add types RESP2 has not: a proxy that
 * knew only RESP2 threw `unexpected RESP type "%"` at HELLO's map and dropped the connection, so
 * every fault suite on ioredis 6 failed. Here its parser on every RESP3 type, whole and cut at every
 * byte, and the proxy between a raw RESP3 connection and a real redis-server: replies, injected
 * errors and pushes, each where it belongs.
 */
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type TestRedis } from '@mcp-kit/testbed/redis';
import { respValueLength, startRespFaultProxy, type RespFaultProxy } from '@mcp-kit/testbed/resp-faults';

/** One complete value of each RESP type, RESP2's and RESP3's (the examples of the RESP3 specification among them). */
const VALUES: Record<string, string> = {
  'simple string': '+OK\r\n',
  'simple error': '-ERR unknown command\r\n',
  integer: ':-42\r\n',
  'bulk string': '$5\r\nhello\r\n',
  'bulk string holding CRLF': '$4\r\na\r\nb\r\n',
  'empty bulk string': '$0\r\n\r\n',
  'RESP2 null bulk string': '$-1\r\n',
  array: '*2\r\n:1\r\n$1\r\na\r\n',
  'RESP2 null array': '*-1\r\n',
  null: '_\r\n',
  boolean: '#t\r\n',
  double: ',3.14\r\n',
  'double inf': ',-inf\r\n',
  'big number': '(3492890328409238509324850943850943825024385\r\n',
  'blob error': '!21\r\nSYNTAX invalid syntax\r\n',
  'verbatim string': '=15\r\ntxt:Some string\r\n',
  map: '%2\r\n+first\r\n:1\r\n+second\r\n:2\r\n',
  set: '~3\r\n+orange\r\n+apple\r\n#f\r\n',
  push: '>3\r\n$7\r\nmessage\r\n$7\r\nchannel\r\n$5\r\nhello\r\n',
  'attribute and the value it describes':
    '|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n*2\r\n:2039123\r\n:9543892\r\n',
  'nested aggregates':
    '%2\r\n$4\r\nkeys\r\n~2\r\n_\r\n=7\r\ntxt:a\r\n\r\n$3\r\nmap\r\n*1\r\n|1\r\n+ttl\r\n:3600\r\n%1\r\n(1\r\n!3\r\nbad\r\n',
};

describe('respValueLength', () => {
  for (const [name, value] of Object.entries(VALUES)) {
    it(`${name}: its whole length, and -1 for every prefix of it`, () => {
      const bytes = Buffer.from(value, 'latin1');
      expect(respValueLength(bytes, 0)).toBe(bytes.length);
      // After another value, and followed by the start of the next one.
      const framed = Buffer.concat([Buffer.from(':1\r\n'), bytes, Buffer.from('*3\r\n')]);
      expect(respValueLength(framed, 4)).toBe(bytes.length);
      for (let cut = 0; cut < bytes.length; cut++) expect(respValueLength(bytes.subarray(0, cut), 0), `cut at ${cut}`).toBe(-1);
    });
  }

  it('a byte that starts no RESP type, and a streamed aggregate (never sent by Redis), are refused by name', () => {
    expect(() => respValueLength(Buffer.from('?x\r\n'), 0)).toThrow(/unexpected RESP type "\?"/);
    expect(() => respValueLength(Buffer.from('*?\r\n'), 0)).toThrow(/unexpected length "\?"/);
  });
});

/** A raw RESP3 connection: commands out as RESP arrays, replies read back one value at a time as their bytes. */
class RawConnection {
  private readonly socket: Socket;
  private buffer = Buffer.alloc(0);
  private waiting: (() => void) | undefined;

  constructor(port: number) {
    this.socket = connect(port, '127.0.0.1');
    this.socket.on('data', (chunk: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, chunk]);
      this.waiting?.();
    });
  }

  send(...args: string[]): void {
    this.socket.write(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`);
  }

  /** The next complete value, as its bytes. */
  async read(): Promise<string> {
    for (;;) {
      const length = respValueLength(this.buffer, 0);
      if (length >= 0) {
        const value = this.buffer.toString('latin1', 0, length);
        this.buffer = this.buffer.subarray(length);
        return value;
      }
      await new Promise<void>((resolve) => (this.waiting = resolve));
    }
  }

  close(): void {
    this.socket.destroy();
  }
}

describe('the proxy between a RESP3 connection and redis-server', () => {
  let redis: TestRedis;
  let proxy: RespFaultProxy;

  beforeAll(async () => {
    redis = await startRedis();
    proxy = await startRespFaultProxy(redis.port, 3);
  });

  afterAll(async () => {
    await proxy?.close();
    await redis?.stop();
  });

  it("passes Redis' RESP3 replies in command order, with its injected errors in their commands' places", async () => {
    const conn = new RawConnection(proxy.port);
    try {
      conn.send('HELLO', '3');
      expect(await conn.read()).toMatch(/^%\d+\r\n/);
      proxy.failWhen = (command) => command === 'ZSCORE';
      proxy.failRate = 1;
      conn.send('SADD', 's', 'a');
      conn.send('ZADD', 'z', '1.5', 'm');
      conn.send('ZSCORE', 'z', 'm');
      conn.send('SMEMBERS', 's');
      conn.send('CONFIG', 'GET', 'maxmemory-policy');
      conn.send('GET', 'missing');
      conn.send('CLIENT', 'INFO');
      expect(await conn.read()).toBe(':1\r\n');
      expect(await conn.read()).toBe(':1\r\n');
      expect(await conn.read()).toBe('-ERR injected fault (ZSCORE)\r\n');
      expect(await conn.read()).toBe('~1\r\n$1\r\na\r\n');
      expect(await conn.read()).toBe('%1\r\n$16\r\nmaxmemory-policy\r\n$10\r\nnoeviction\r\n');
      expect(await conn.read()).toBe('_\r\n');
      expect(await conn.read()).toMatch(/^=\d+\r\ntxt:id=\d+ [^\r]* resp=3\b/);
      proxy.failRate = 0;
      conn.send('ZSCORE', 'z', 'm');
      expect(await conn.read()).toBe(',1.5\r\n');
    } finally {
      proxy.failRate = 0;
      conn.close();
    }
  });

  it("a push goes after the replies Redis sent before it, never in a command's place; a subscribed connection gets its messages", async () => {
    const conn = new RawConnection(proxy.port);
    let subscriber: RawConnection | undefined;
    try {
      conn.send('HELLO', '3');
      await conn.read();
      conn.send('CLIENT', 'TRACKING', 'ON');
      expect(await conn.read()).toBe('+OK\r\n');
      conn.send('GET', 'tracked');
      expect(await conn.read()).toBe('_\r\n');
      // Redis pushes an invalidation to this connection when another one changes the key.
      const other = new RawConnection(proxy.port);
      other.send('SET', 'tracked', 'v');
      expect(await other.read()).toBe('+OK\r\n');
      other.close();
      expect(await conn.read()).toBe('>2\r\n$10\r\ninvalidate\r\n*1\r\n$7\r\ntracked\r\n');
      // A notice of the proxy's own, between two replies.
      conn.send('PING');
      expect(await conn.read()).toBe('+PONG\r\n');
      expect(proxy.notify('>3\r\n$9\r\nMIGRATING\r\n:1\r\n:15\r\n')).toBeGreaterThanOrEqual(1);
      conn.send('ECHO', 'after');
      expect(await conn.read()).toBe('>3\r\n$9\r\nMIGRATING\r\n:1\r\n:15\r\n');
      expect(await conn.read()).toBe('$5\r\nafter\r\n');
      expect(() => proxy.notify('+OK\r\n')).toThrow(/not one RESP3 push/);

      subscriber = new RawConnection(proxy.port);
      subscriber.send('HELLO', '3');
      await subscriber.read();
      subscriber.send('SUBSCRIBE', 'news');
      expect(await subscriber.read()).toBe('>3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n');
      expect(proxy.subscribers(/news/)).toBe(1);
      conn.send('PUBLISH', 'news', 'hi');
      expect(await conn.read()).toBe(':1\r\n');
      expect(await subscriber.read()).toBe('>3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n');
    } finally {
      conn.close();
      subscriber?.close();
    }
  });
});
