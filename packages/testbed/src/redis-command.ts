/**
 * One Redis command from a test, on a connection of its own (no client library: the tests reach
 * Redis only through the instances, but a few look at a key or change an ACL directly).
 */
import { connect } from 'node:net';

export type RedisReply = string | number | null | RedisReply[];

/** Sends `args` as one command to the Redis on `port` and resolves with its reply; an error reply rejects. */
export function redisCommand(port: number, ...args: Array<string | number>): Promise<RedisReply> {
  const parts = args.map(String);
  const command = `*${parts.length}\r\n${parts.map((p) => `$${Buffer.byteLength(p)}\r\n${p}\r\n`).join('')}`;
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let buffer = Buffer.alloc(0);
    socket.once('error', reject);
    socket.on('data', (chunk: Buffer) => {
      buffer = Buffer.concat([buffer, chunk]);
      const parsed = parse(buffer, 0);
      if (!parsed) return;
      socket.destroy();
      if (parsed.value instanceof Error) reject(parsed.value);
      else resolve(parsed.value);
    });
    socket.write(command);
  });
}

/** The reply at `at`, and where it ends; `undefined` while it is not all there. */
function parse(buf: Buffer, at: number): { value: RedisReply | Error; end: number } | undefined {
  const lineEnd = buf.indexOf('\r\n', at);
  if (lineEnd < 0) return undefined;
  const type = String.fromCharCode(buf[at]!);
  const line = buf.toString('utf8', at + 1, lineEnd);
  const next = lineEnd + 2;
  if (type === '+') return { value: line, end: next };
  if (type === '-') return { value: new Error(line), end: next };
  if (type === ':') return { value: Number(line), end: next };
  const n = Number(line);
  if (type === '$') {
    if (n < 0) return { value: null, end: next };
    if (buf.length < next + n + 2) return undefined;
    return { value: buf.toString('utf8', next, next + n), end: next + n + 2 };
  }
  if (type === '*') {
    if (n < 0) return { value: null, end: next };
    const items: RedisReply[] = [];
    let end = next;
    for (let i = 0; i < n; i++) {
      const item = parse(buf, end);
      if (!item) return undefined;
      if (item.value instanceof Error) return item;
      items.push(item.value);
      end = item.end;
    }
    return { value: items, end };
  }
  throw new Error(`redis-command: unexpected reply type ${JSON.stringify(type)}`);
}
