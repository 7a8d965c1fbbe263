// Workload 3: resume cost as the store grows. One stream holds 100 events after its priming
// event; the store is filled with events of other sessions and streams to each size; every
// resume replays those 100 events. Server side: from the GET reaching the app to the last replayed
// byte handed to the socket. End to end: from the GET leaving to the 100th event arriving.
import { McpHttp, parseEvent } from '../client/mcp.mjs';
import { median, percentile } from '../stats.mjs';

const REPLAYED = 100;
const QUIET_MS = 250;

export async function resume(
  handle,
  { sizes = [10_000, 100_000, 1_000_000], samples = 50, warmups = 5, budgetMs = 30_000, minSamples = 3 },
) {
  const client = new McpHttp(handle.origin, { connections: 4, path: handle.path });
  try {
    const session = await client.initialize();
    const original = [];
    // 99 notifications and the response: 100 events after the priming event.
    const r = await client.callTool(session, 'bench_burst', { count: REPLAYED - 1 }, (block) => {
      const { data } = parseEvent(block);
      if (data) original.push(data);
    });
    if (r.status !== 200 || original.length !== REPLAYED) throw new Error(`resume setup: ${r.status}, ${original.length} events`);
    const cursor = r.firstEventId;
    let filled = 0;
    const results = [];
    let inOrder = true;
    let fewest = REPLAYED;
    for (const size of sizes) {
      const fill = await client.control(`/bench/fill?events=${size - filled}`, 'POST');
      filled = size;
      const e2e = [];
      let timings = [];
      const started = Date.now();
      for (let i = 0; i < warmups + samples; i++) {
        if (i === warmups) await client.control('/bench/resume-timings');
        // A replay that stops short (the SDK's example store can drop events) ends after a quiet spell.
        const g = await client.get(session, { lastEventId: cursor, stopAfterEvents: REPLAYED, quietMs: QUIET_MS });
        if (g.status !== 200 || g.events === 0)
          throw new Error(`resume at ${size}: status ${g.status}, ${g.events} events ${g.error ?? ''}`);
        fewest = Math.min(fewest, g.events);
        if (g.blocks.some((block, k) => parseEvent(block).data !== original[k])) inOrder = false;
        if (i >= warmups) e2e.push(g.ended - g.started);
        if (i + 1 >= minSamples + warmups && Date.now() - started > budgetMs) break;
        if (i < warmups && Date.now() - started > budgetMs) break;
      }
      // The server records a timing when the connection closes; give the last one a moment.
      for (let tries = 0; tries < 20 && timings.length < e2e.length; tries++) {
        timings = timings.concat((await client.control('/bench/resume-timings')).timings);
        if (timings.length < e2e.length) await new Promise((resolve) => setTimeout(resolve, 25));
      }
      results.push({
        storeEvents: size,
        fillMs: fill.ms,
        samples: e2e.length,
        serverMs: median(timings),
        serverP99Ms: percentile(timings, 99),
        e2eMs: median(e2e),
        e2eP99Ms: percentile(e2e, 99),
      });
    }
    return { replayed: REPLAYED, fewestReplayed: fewest, inOrder, sizes: results };
  } finally {
    await client.close();
  }
}
