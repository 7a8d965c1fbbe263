import type { Cluster, Redis } from 'ioredis';
import { isCluster, masterKeyOf } from './redis-cluster.js';

/** CRC16/XMODEM (polynomial 0x1021, no reflection, initial 0): what Redis Cluster hashes keys with. */
function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

/**
 * The hash slot of a key or a sharded channel, as the Redis Cluster specification computes it: of
 * its hash tag (what is between the first `{` and the first `}` after it, when not empty), else of
 * the whole key; modulo 16384.
 */
export function keySlot(key: string): number {
  const bytes = Buffer.from(key);
  const open = bytes.indexOf(0x7b);
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1);
    if (close > open + 1) return crc16(bytes.subarray(open + 1, close)) % 16384;
  }
  return crc16(bytes) % 16384;
}

/** One command of a {@link pipelinePerNode}: its name and arguments, its key first. */
export type KeyedCommand = [name: string, key: string, ...args: Array<string | number>];

/** A pipelined command's outcome, as ioredis reports it. */
export type PipelineReply = [error: Error | null, result: unknown];

/** Redirections and refusals a command alone gets through (ioredis follows them), but a pipeline does not. */
const REDIRECTED = /^(MOVED|ASK|TRYAGAIN|CLUSTERDOWN)\b/;

/**
 * `commands` over many keys (many sessions), in as few round trips as the topology allows: one
 * pipeline on one Redis; on a Redis Cluster one per master, since ioredis sends a cluster pipeline
 * to one node and refuses one whose keys its slots map to several. A command that a pipeline could
 * not place (its slot moved meanwhile: `MOVED`, `ASK`, `TRYAGAIN`) is sent again alone, as a
 * command that follows redirections. Resolves with each command's outcome, in order; rejects only
 * when no pipeline could be sent.
 */
export async function pipelinePerNode(client: Redis | Cluster, commands: readonly KeyedCommand[]): Promise<PipelineReply[]> {
  if (commands.length === 0) return [];
  if (!isCluster(client)) return send(client, commands);
  const groups = new Map<string, number[]>();
  for (const [i, [, key]] of commands.entries()) {
    const slot = keySlot(key);
    // Slots not read yet: one group per slot, which ioredis places once it knows them.
    const group = masterKeyOf(client, slot) ?? `slot ${slot}`;
    let members = groups.get(group);
    if (!members) groups.set(group, (members = []));
    members.push(i);
  }
  const replies = new Array<PipelineReply>(commands.length);
  await Promise.all(
    [...groups.values()].map(async (members) => {
      let sent: PipelineReply[];
      try {
        sent = await send(
          client,
          members.map((i) => commands[i]!),
        );
      } catch (error) {
        // Refused whole (its keys span nodes after a change of topology): each command alone.
        sent = members.map(() => [error as Error, undefined]);
      }
      await Promise.all(
        members.map(async (i, j) => {
          const reply = sent[j]!;
          if (reply[0] && (REDIRECTED.test(reply[0].message) || /same slots allocation group|same slot/.test(reply[0].message)))
            replies[i] = await alone(client, commands[i]!);
          else replies[i] = reply;
        }),
      );
    }),
  );
  return replies;
}

async function send(client: Redis | Cluster, commands: readonly KeyedCommand[]): Promise<PipelineReply[]> {
  const pipeline = client.pipeline();
  for (const [name, ...args] of commands) pipeline.call(name, ...args);
  return ((await pipeline.exec()) ?? []) as PipelineReply[];
}

async function alone(client: Redis | Cluster, [name, ...args]: KeyedCommand): Promise<PipelineReply> {
  try {
    return [null, await client.call(name, ...args)];
  } catch (error) {
    return [error as Error, undefined];
  }
}
