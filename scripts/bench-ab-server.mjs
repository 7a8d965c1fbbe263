// The server both sides of scripts/bench-ab.mjs run. bench-ab copies this one file into each
// revision's worktree (as packages/bench/src/servers/ab-server.mjs), so it loads that revision's
// build while the server around it is the same on both sides: only the packages differ. mcp-kit
// on Express with its defaults, serving the fixture and `bench_burst` (as packages/bench's
// servers/tools.mjs does); BENCH_REDIS_URL puts it on @mcp-kit/redis (forwarding mode, one
// instance), so every event is written to Redis before it goes out. /bench/stats answers the CPU
// readings the workloads take.
import express from 'express';
import { createMcpHandler } from '@mcp-kit/core';
import { mcpExpress } from '@mcp-kit/express';
import { createFixtureServer } from '@mcp-kit/fixtures';
import { z } from 'zod';

const host = process.env.HOST ?? '127.0.0.1';
const port = Number(process.env.PORT);

let stores = {};
if (process.env.BENCH_REDIS_URL) {
  // @mcp-kit/redis is no dependency of the bench: this worktree's build of it, by path.
  const { createRedisScaleOut } = await import('../../../redis/dist/index.js');
  const scaleOut = createRedisScaleOut({
    url: process.env.BENCH_REDIS_URL,
    keyPrefix: process.env.BENCH_REDIS_PREFIX ?? 'mcp-kit:',
    internalUrl: `http://${host}:${port}/mcp`,
  });
  await scaleOut.ready(10_000);
  stores = { eventStore: scaleOut.eventStore, cluster: scaleOut.cluster, taskStore: scaleOut.taskStore };
}

function buildServer() {
  const server = createFixtureServer({ name: 'bench-ab' });
  server.registerTool(
    'bench_burst',
    { description: 'Sends `count` log notifications on this request stream', inputSchema: { count: z.number().int().min(0) } },
    async ({ count }, extra) => {
      for (let i = 1; i <= count; i++) {
        await extra.sendNotification({
          method: 'notifications/message',
          params: { level: 'info', logger: 'bench', data: `xxxxxxxxxxxx${i % 10_000}` },
        });
        // A real producer yields now and then; the socket drains meanwhile.
        if (i % 100 === 0) await new Promise((resolve) => setImmediate(resolve));
      }
      return { content: [{ type: 'text', text: `burst ${count}` }] };
    },
  );
  return server;
}

const handler = createMcpHandler({ server: buildServer, retryMs: 1_000, ...stores });
const app = express();
app.get('/bench/stats', (_req, res) => {
  const cpu = process.cpuUsage();
  res.json({ pid: process.pid, rss: process.memoryUsage().rss, cpuUserUs: cpu.user, cpuSystemUs: cpu.system });
});
app.use('/mcp', mcpExpress(handler));
app.listen(port, host, () => console.log(`LISTENING ${port}`));
process.once('SIGTERM', () => process.exit(0));
