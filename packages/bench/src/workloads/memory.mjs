// Workload 4: RSS growth per session (`sessions` initialized sessions) and per idle GET stream
// (`streams` standalone GET streams, one per session, on top of as many sessions). Readings are
// taken inside the server process after a full GC.
import { setTimeout as sleep } from 'node:timers/promises';
import { McpHttp } from '../client/mcp.mjs';
import { runPool } from '../stats.mjs';

/** A server that hibernates idle sessions is read once all `n` of them are asleep (sweeps run every 100 ms). */
async function asleep(client, n) {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const s = await client.control('/bench/stats?nogc');
    if (s.hibernated >= n) return;
    if (Date.now() > deadline) throw new Error(`only ${s.hibernated} of ${n} sessions hibernated within 60 s`);
    await sleep(100);
  }
}

export async function memory(handle, { sessions = 1_000, streams = 10_000, settleMs = 0 }) {
  const client = new McpHttp(handle.origin, { connections: 32, path: handle.path });
  const streamClient = new McpHttp(handle.origin, { connections: streams + 16, path: handle.path });
  const open = [];
  try {
    // The readings before streams come after the process has been idle `settleMs`: V8 returns the
    // pages that garbage (startup, or servers a hibernating handler let go) held only after a few
    // idle seconds.
    const reading = async () => {
      await sleep(Math.max(200, settleMs));
      return client.control('/bench/stats');
    };
    const base = await reading();
    const first = await runPool(sessions, 16, () => client.initialize());
    if (handle.server.hibernates) await asleep(client, sessions);
    const withSessions = await reading();
    const more = await runPool(Math.max(0, streams - sessions), 16, () => client.initialize());
    const all = first.concat(more);
    if (handle.server.hibernates) await asleep(client, streams);
    const beforeStreams = await reading();
    // Open one idle GET stream per session; a stream counts once its response headers are in.
    let opened = 0;
    await runPool(
      streams,
      64,
      (i) =>
        new Promise((resolve, reject) => {
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
        }),
    );
    // Right away: a settle here would let V8 hand back pages the streams do not use, and RSS
    // growth would come out below what the streams hold (or even negative).
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
