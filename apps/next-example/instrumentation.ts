// Runs once when `next start` (or `next dev`) starts a server. The check lives in a Node-only
// module: the edge build of this file must not see `process.exit`.
export async function register(): Promise<void> {
  if (process.env.NEXT_RUNTIME === 'nodejs') await import('./instrumentation-node');
}
