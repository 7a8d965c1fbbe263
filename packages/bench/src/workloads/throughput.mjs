// Workload 1: tools/call throughput and latency. `sessions` sessions, `inFlight` calls in flight
// (each worker bound to one session, calling back to back), SSE or JSON responses.
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { McpHttp } from '../client/mcp.mjs';
import { cpuUs, percentile, runPool } from '../stats.mjs';

export async function throughput(
  handle,
  { sessions = 16, inFlight = 64, warmupMs = 2_000, durationMs = 10_000, tool = 'test_simple_text' },
) {
  const client = new McpHttp(handle.origin, { connections: inFlight, path: handle.path, headers: handle.headers });
  try {
    const list = await runPool(sessions, 8, () => client.initialize());
    return await measureCalls(client, { inFlight, warmupMs, durationMs }, (i) => client.callTool(list[i % sessions], tool, {}));
  } finally {
    await client.close();
  }
}

/**
 * `inFlight` workers each run `call(worker)` back to back; after `warmupMs`, counts the calls that
 * complete in `durationMs` and their latency (POST sent to response body ended), and reads the
 * server's CPU over that window. A call counts as an error unless it is a 200 carrying a result.
 */
export async function measureCalls(client, { inFlight, warmupMs, durationMs }, call) {
  const latencies = [];
  let errors = 0;
  let measuring = false;
  let stopping = false;
  const worker = async (i) => {
    while (!stopping) {
      const r = await call(i);
      const ok = r.status === 200 && r.text.includes('"result"');
      if (!measuring) continue;
      if (!ok) errors++;
      else latencies.push(r.ended - r.started);
    }
  };
  const workers = Array.from({ length: inFlight }, (_, i) => worker(i));
  await sleep(warmupMs);
  const before = await client.control('/bench/stats?nogc');
  const clientCpu = process.cpuUsage();
  latencies.length = 0;
  measuring = true;
  const started = performance.now();
  await sleep(durationMs);
  measuring = false;
  const seconds = (performance.now() - started) / 1000;
  const clientCpuUs = Object.values(process.cpuUsage(clientCpu)).reduce((a, b) => a + b, 0);
  const after = await client.control('/bench/stats?nogc');
  stopping = true;
  await Promise.all(workers);
  const calls = latencies.length;
  return {
    calls,
    errors,
    seconds,
    callsPerSec: calls / seconds,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    maxMs: percentile(latencies, 100),
    serverCpuUsPerCall: cpuUs(before, after) / Math.max(1, calls),
    serverCpuShare: cpuUs(before, after) / 1e6 / seconds,
    clientCpuShare: clientCpuUs / 1e6 / seconds,
  };
}
