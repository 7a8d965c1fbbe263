// Workload 2: one tools/call that sends `events` ~100-byte log notifications on its POST stream.
// Events/s and MB/s from the POST leaving to the stream's last byte; median of `reps` runs.
import { McpHttp } from '../client/mcp.mjs';
import { cpuUs, median } from '../stats.mjs';

export async function burst(handle, { events = 20_000, reps = 5, warmups = 1 }) {
  const client = new McpHttp(handle.origin, { connections: 2, path: handle.path });
  try {
    const session = await client.initialize();
    const runs = [];
    for (let i = 0; i < warmups + reps; i++) {
      const before = await client.control('/bench/stats?nogc');
      const r = await client.callTool(session, 'bench_burst', { count: events });
      const after = await client.control('/bench/stats?nogc');
      // Every notification, the response, and (for resumable streams) the priming event.
      const complete = r.status === 200 && r.text.includes(`burst ${events}`) && r.events >= events + 1;
      if (!complete) throw new Error(`burst incomplete: status ${r.status}, ${r.events} events, last ${r.text.slice(0, 200)}`);
      const seconds = (r.ended - r.started) / 1000;
      if (i >= warmups) runs.push({ seconds, bytes: r.bytes, events: r.events, serverCpuUs: cpuUs(before, after) });
    }
    const seconds = median(runs.map((r) => r.seconds));
    const bytes = median(runs.map((r) => r.bytes));
    return {
      events,
      reps,
      eventsPerSec: events / seconds,
      mbPerSec: bytes / seconds / 1e6,
      bytesPerEvent: bytes / events,
      ms: seconds * 1000,
      serverCpuUsPerEvent: median(runs.map((r) => r.serverCpuUs)) / events,
      runsMs: runs.map((r) => +(r.seconds * 1000).toFixed(2)),
    };
  } finally {
    await client.close();
  }
}
