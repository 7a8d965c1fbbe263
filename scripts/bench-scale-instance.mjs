// Loaded into each example app process that `pnpm bench:scale` starts (`node --expose-gc --import
// this-file dist/server.js`): its heap after a full GC and its CPU time, on BENCH_STATS_PORT, beside
// the app and without changing it. The app is what a user runs; only the reading is added.
import { createServer } from 'node:http';

const port = Number(process.env.BENCH_STATS_PORT);
if (port > 0) {
  const stats = createServer((req, res) => {
    // Several passes: a first full GC can leave what a finalizer or a weak reference frees for the next.
    // `?nogc` for a CPU reading alone, which a GC would add to.
    if (!req.url?.includes('nogc')) for (let i = 0; i < 3; i++) globalThis.gc?.();
    const memory = process.memoryUsage();
    const cpu = process.cpuUsage();
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({ heapUsed: memory.heapUsed, rss: memory.rss, cpuUs: cpu.user + cpu.system, gc: typeof globalThis.gc === 'function' }),
    );
  });
  stats.listen(port, '127.0.0.1');
  // The app's own shutdown decides when the process ends.
  stats.unref();
}
