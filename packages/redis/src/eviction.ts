import type { Redis } from 'ioredis';

/** The code of the warning {@link checkEvictionPolicy} emits. */
export const EVICTION_WARNING = 'MCP_KIT_REDIS_EVICTION';

/** One check per client (a connection error leaves it to the next call). */
const checks = new WeakMap<Redis, Promise<void>>();
/** Each warning once per process, however many clients see the same Redis. */
const warned = new Set<string>();

/**
 * Reads Redis' `maxmemory-policy` (`INFO memory`, which managed services that refuse `CONFIG`
 * usually answer; then `CONFIG GET`) and warns once (`MCP_KIT_REDIS_EVICTION`) when Redis may
 * evict keys: mcp-kit's session, stream and task keys carry TTLs, so under any policy but
 * `noeviction` (the `volatile-*` ones included) a full Redis may delete a live session's owner
 * record (another instance takes the session over while its owner still serves it), its restore
 * record (the session is gone) or a task (invariant: deployment-owns-sessions). When Redis
 * refuses both commands, it warns once that it could not tell. Never rejects, and never stops the caller from serving.
 */
export function checkEvictionPolicy(client: Redis): Promise<void> {
  let check = checks.get(client);
  if (!check) {
    check = readPolicy(client).then(
      (found) => {
        if (found) report(found);
      },
      () => void checks.delete(client), // Redis is unreachable now: the next caller asks again
    );
    checks.set(client, check);
  }
  return check;
}

/** The policy and limit, or `undefined` after a warning that they could not be read; rejects when Redis does not answer at all. */
async function readPolicy(client: Redis): Promise<{ policy: string; maxmemory: number } | undefined> {
  const refusals: string[] = [];
  try {
    const info = await client.info('memory');
    const policy = /^maxmemory_policy:(\S+)/m.exec(info)?.[1];
    const maxmemory = /^maxmemory:(\d+)/m.exec(info)?.[1];
    if (policy !== undefined && maxmemory !== undefined) return { policy, maxmemory: Number(maxmemory) };
    refusals.push('INFO memory has no maxmemory_policy');
  } catch (error) {
    if (!refused(error)) throw error;
    refusals.push(`INFO: ${(error as Error).message}`);
  }
  try {
    const policy = configValue(await client.call('CONFIG', 'GET', 'maxmemory-policy'), 'maxmemory-policy');
    const maxmemory = configValue(await client.call('CONFIG', 'GET', 'maxmemory'), 'maxmemory');
    if (policy !== undefined && maxmemory !== undefined) return { policy, maxmemory: Number(maxmemory) };
    refusals.push('CONFIG GET answered nothing');
  } catch (error) {
    if (!refused(error)) throw error;
    refusals.push(`CONFIG GET: ${(error as Error).message}`);
  }
  warnOnce(
    "mcp-kit: could not read Redis' maxmemory-policy " +
      `(${refusals.join('; ')}). Make sure it is noeviction: under any other policy a full Redis may delete ` +
      "a live session's owner or restore record (a second owner, or a session gone) or a task.",
  );
  return undefined;
}

/**
 * The value of `name` in a `CONFIG GET` reply: `[name, value]` in RESP2 and in ioredis 6's default
 * reply mapping, `{ name: value }` with ioredis 6's `replyMapping: 'resp3'` (RESP3 answers a map).
 */
function configValue(reply: unknown, name: string): string | undefined {
  if (Array.isArray(reply)) {
    const at = reply.indexOf(name);
    return at >= 0 && at % 2 === 0 ? String(reply[at + 1]) : undefined;
  }
  if (reply !== null && typeof reply === 'object' && name in reply) return String((reply as Record<string, unknown>)[name]);
  return undefined;
}

/** Redis answered with an error (unknown command, NOPERM): it will not tell, unlike a dropped connection. */
function refused(error: unknown): boolean {
  return error instanceof Error && error.name === 'ReplyError';
}

function report({ policy, maxmemory }: { policy: string; maxmemory: number }): void {
  // Without a memory limit Redis never evicts (64-bit builds).
  if (policy === 'noeviction' || maxmemory === 0) return;
  warnOnce(
    `mcp-kit: Redis may evict keys (maxmemory-policy ${policy}, maxmemory ${maxmemory} bytes). mcp-kit's session, ` +
      "stream and task keys carry TTLs, so a full Redis may delete a live session's owner record (another instance then takes the " +
      'session over while its owner still serves it), its restore record (the session is gone) or a task. Set ' +
      "maxmemory-policy to noeviction (CONFIG SET maxmemory-policy noeviction, or your provider's parameter group): " +
      'mcp-kit bounds its own keys (MAXLEN, TTLs), and a full Redis then refuses writes (503s) instead of losing state.',
  );
}

function warnOnce(message: string): void {
  if (warned.has(message)) return;
  warned.add(message);
  process.emitWarning(message, { code: EVICTION_WARNING });
}
