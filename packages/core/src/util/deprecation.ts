const warned = new Set<string>();

/**
 * Tells the developer once per process that they use a deprecated name: a `DeprecationWarning`
 * through `process.emitWarning` where there is one (Node.js, where `--no-deprecation` silences it),
 * else `console.warn` (a fetch runtime without `process`).
 */
export function deprecated(code: string, message: string): void {
  if (warned.has(code)) return;
  warned.add(code);
  const processLike = (globalThis as { process?: { emitWarning?: (message: string, options: object) => void } }).process;
  if (typeof processLike?.emitWarning === 'function') processLike.emitWarning(message, { type: 'DeprecationWarning', code });
  else console.warn(`[mcp-kit] ${code}: ${message}`);
}
