// `@mcp-kit/core/node`: what only a Node.js process needs (signals, `process.exit`, a `node:http`
// server), kept off the main entry, which fetch runtimes and edge bundles import too.
export { shutdownGracefully, drainOnSignal } from './bridges/node/shutdown.js';
export type { GracefulShutdown, GracefulShutdownOptions, ShutdownResult, ShutdownStep } from './bridges/node/shutdown.js';
