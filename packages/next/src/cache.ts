/** Where {@link getOrCreate} keeps the value named `name`: process-wide, shared by every bundle's copy of this module. */
export function cacheKey(name: string): symbol {
  return Symbol.for(`@mcp-kit/next:${name}`);
}

/** The value cached under `name` by `getOrCreate`, or `undefined` if none was made yet. */
export function cached<T>(name: string): T | undefined {
  return (globalThis as unknown as Record<symbol, T | undefined>)[cacheKey(name)];
}
