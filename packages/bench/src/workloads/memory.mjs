// Workload 4: RSS growth per session (`sessions` initialized sessions) and per idle GET stream
// (`streams` standalone GET streams, one per session, on top of as many sessions). Readings are
// taken inside the server process after a full GC.
import { setTimeout as sleep } from 'node:timers/promises';
import { McpHttp } from '../client/mcp.mjs';
import { runPool } from '../stats.mjs';

export async function memory(handle, { sessions = 1_000, streams = 10_000 }) {
  const client = new McpHttp(handle.origin, { connections: 32, path: handle.path });
  const streamClient = new McpHttp(handle.origin, { connections: streams + 16, path: handle.path });
  const open = [];
  try {
    await sleep(200);
    const base = await client.control('/bench/stats');
    const first = await runPool(sessions, 16, () => client.initialize());
    const withSessions = await client.control('/bench/stats');
    const more = await runPool(Math.max(0, streams - sessions), 16, () => client.initialize());
    const all = first.concat(more);
    const beforeStreams = await client.control('/bench/stats');
    // Open one idle GET stream per session; a stream counts once its response headers are in.
    let opened = 0;
    await runPool(streams, 64, (i) => new Promise((resolve, reject) => {
      const pending = streamClient.get(all[i], {
        onOpen: (out, abort) => {
          if (out.status !== 200) reject(new Error(`GET stream: status ${out.status}`));
          opened++;
          open.push(abort);
          resolve();
        },
      });
      pending.then((out) => {
        if (out.error) reject(out.error);
      });
    }));
    await sleep(500);
    const withStreams = await client.control('/bench/stats');
    return {
      sessions,
      streams: opened,
      baseRss: base.rss,
      rssPerSessionBytes: (withSessions.rss - base.rss) / sessions,
      heapPerSessionBytes: (withSessions.heapUsed - base.heapUsed) / sessions,
      rssPerStreamBytes: (withStreams.rss - beforeStreams.rss) / opened,
      heapPerStreamBytes: (withStreams.heapUsed - beforeStreams.heapUsed) / opened,
      rssAtEnd: withStreams.rss,
    };
  } finally {
    for (const abort of open) abort();
    await streamClient.close();
    await client.close();
  }
}
