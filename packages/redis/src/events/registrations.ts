import type { RedisClient } from '../client.js';
import type { UnfinishedStream } from '@mcp-kit/core';
import type { Keyspace } from '../keyspace.js';

/** A stream registered in its session's hash (`c:<writer>.<n>`: `[stream id, writer, request ids]`). */
interface Registered {
  streamId: string;
  requestIds: Array<string | number>;
}

/** The streams registered in a session, from its hash. */
export async function registeredStreams(client: RedisClient, keys: Keyspace, sessionId: string): Promise<Registered[]> {
  const fields = await client.hgetall(keys.session(sessionId));
  const out: Registered[] = [];
  for (const [name, value] of Object.entries(fields)) {
    if (!name.startsWith('c:')) continue;
    try {
      const [streamId, , requestIds] = JSON.parse(value) as [string, string, Array<string | number>];
      if (!out.some((r) => r.streamId === streamId)) out.push({ streamId, requestIds });
    } catch {
      // not a registration
    }
  }
  return out;
}

/**
 * The session's registered streams whose final frame is not stored, read in two round trips (the
 * registrations, then each stream's last entry, in the session's slot): those an instance that
 * took the session over answers with the lost-call error.
 */
export async function unfinishedStreams(client: RedisClient, keys: Keyspace, sessionId: string): Promise<UnfinishedStream[]> {
  const registered = await registeredStreams(client, keys, sessionId);
  if (registered.length === 0) return [];
  const pipeline = client.pipeline();
  for (const { streamId } of registered) pipeline.xrevrange(keys.stream(sessionId, streamId), '+', '-', 'COUNT', 1);
  const replies = (await pipeline.exec()) ?? [];
  const out: UnfinishedStream[] = [];
  for (const [i, { streamId, requestIds }] of registered.entries()) {
    const [error, entries] = replies[i] ?? [new Error('no reply')];
    if (error) {
      // A string holds a stream's only frame, its final one: finished.
      if (/WRONGTYPE/.test(String(error))) continue;
      throw error;
    }
    const last = (entries as Array<[string, string[]]>)[0];
    if (last && last[1][0] === 'f' && last[1][3] === '1') continue;
    out.push({ streamId, lastSeq: last ? Number(last[0].split('-')[0]) : 0, requestIds });
  }
  return out;
}
