// `node --import=./scripts/ioredis6.mjs …`: every `import 'ioredis'` in the process loads ioredis 6
// (the root devDependency `ioredis6`, an npm alias of ioredis@6) instead of the 5 the workspace
// builds against, so the built example apps a test starts run on 6 as a user's install would.
// vitest.config.ts puts it in NODE_OPTIONS when MCP_KIT_IOREDIS=6. ESM imports only: Node 20's
// hooks do not see `require`, and everything that loads ioredis here imports it.
import { register } from 'node:module';
import { isMainThread } from 'node:worker_threads';

const root = new URL('../', import.meta.url).href;

export async function resolve(specifier, context, nextResolve) {
  if (specifier === 'ioredis') return nextResolve('ioredis6', { ...context, parentURL: root });
  return nextResolve(specifier, context);
}

// The hooks run in a thread of their own, which loads this file again: register from the main one only.
if (isMainThread) register(import.meta.url);
