/**
 * How a Redis cluster's instances share sessions: `'forward'`, each session has an owner, which
 * the other instances reach at its `internalUrl`; `'shared'`, no instance reaches another
 * (serverless), any instance serves any session from its record in Redis.
 */
export type ClusterMode = 'forward' | 'shared';

/** What {@link clusterMode} reads. */
export interface ClusterModeOptions {
  mode?: ClusterMode;
  internalUrl?: string;
}

let warnedImplicitShared = false;

/**
 * The cluster mode `options` ask for, and the internal URL (normalized) in forwarding mode; throws
 * a `TypeError` naming the option (`where` is the caller: `createRedisScaleOut`) when they ask
 * for something that cannot work, before anything connects:
 * - `internalUrl` given but `undefined` (an unset environment variable: `internalUrl: process.env.X`),
 *   or `mode: 'forward'` without it: forwarding was meant, and a shared cluster would be a
 *   silent change of semantics;
 * - an `internalUrl` that is not an absolute http(s) URL, or whose host is empty, `undefined` or
 *   `null` (a template of an unset variable: `http://${process.env.POD_IP}:3000/mcp`), which every
 *   forward would wait on and end with 502;
 * - `mode: 'shared'` with an `internalUrl`.
 *
 * Neither option (the shape of 0.x): a shared cluster, with a deprecation warning (once per process).
 */
export function clusterMode(options: ClusterModeOptions, where: string): { mode: ClusterMode; internalUrl: string } {
  const { mode } = options;
  if (mode !== undefined && mode !== 'forward' && mode !== 'shared')
    throw new TypeError(`${where}: \`mode\` must be 'forward' or 'shared' (got ${JSON.stringify(mode)})`);
  const givenUrl = 'internalUrl' in options;
  if (mode === 'shared') {
    if (options.internalUrl !== undefined)
      throw new TypeError(
        `${where}: \`mode: 'shared'\` takes no \`internalUrl\` (no instance reaches another there); leave it out, or use \`mode: 'forward'\``,
      );
    return { mode, internalUrl: '' };
  }
  if (mode === 'forward' || givenUrl) return { mode: 'forward', internalUrl: checkInternalUrl(options.internalUrl, where) };
  if (!warnedImplicitShared) {
    warnedImplicitShared = true;
    process.emitWarning(
      `${where}: neither \`mode\` nor \`internalUrl\` given: this makes a shared cluster (no instance forwards to another). ` +
        "Say so with `mode: 'shared'`, or give `internalUrl` to forward; a later version will require one of them.",
      { type: 'DeprecationWarning', code: 'MCP_KIT_IMPLICIT_SHARED_CLUSTER' },
    );
  }
  return { mode: 'shared', internalUrl: '' };
}

/** `value` as an absolute http(s) URL with a real host, normalized; else a `TypeError` saying what is wrong. */
function checkInternalUrl(value: unknown, where: string): string {
  const expected =
    'the URL at which the other instances reach this one (e.g. http://10.0.3.7:3000/mcp, a pod IP), ' +
    "or `mode: 'shared'` where instances cannot reach each other (serverless)";
  if (value === undefined || value === null)
    throw new TypeError(`${where}: \`internalUrl\` is ${String(value)} (an unset environment variable?): give ${expected}`);
  if (typeof value !== 'string') throw new TypeError(`${where}: \`internalUrl\` must be a string: give ${expected}`);
  if (value.trim() === '') throw new TypeError(`${where}: \`internalUrl\` is empty: give ${expected}`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new TypeError(
      `${where}: \`internalUrl\` ${JSON.stringify(value)} is not an absolute URL (an unset variable in it?): give ${expected}`,
    );
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new TypeError(`${where}: \`internalUrl\` ${JSON.stringify(value)} is not http(s): give ${expected}`);
  const host = url.hostname.toLowerCase();
  if (host === '') throw new TypeError(`${where}: \`internalUrl\` ${JSON.stringify(value)} has no host: give ${expected}`);
  if (host === 'undefined' || host === 'null')
    throw new TypeError(
      `${where}: \`internalUrl\` ${JSON.stringify(value)} names the host "${host}" (an unset environment variable in a template?): give ${expected}`,
    );
  return url.href;
}
