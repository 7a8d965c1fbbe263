// What waking a hibernated session costs: the first tools/call after hibernation (a new fixture
// server, the replayed initialize) against the next one, on an awake session. Over HTTP, Express,
// in one process. `node packages/bench/src/wake.mjs` after `npx -y pnpm@10.34.9 build`.
import express from 'express';
import { createServer } from 'node:http';
import { createMcpHandler } from '@mcp-kit/core';
import { mcpExpress } from '@mcp-kit/express';
import { createFixtureServer } from '@mcp-kit/fixtures';
const hib = createMcpHandler({ server: () => createFixtureServer(), hibernateAfterMs: 0 });
const app = express();
app.use('/mcp', mcpExpress(hib));
const srv = createServer(app);
await new Promise((r) => srv.listen(0, '127.0.0.1', r));
const url = `http://127.0.0.1:${srv.address().port}/mcp`;
const H = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' };
async function init() {
  const r = await fetch(url, {
    method: 'POST',
    headers: H,
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '1' } },
    }),
  });
  await r.text();
  const sid = r.headers.get('mcp-session-id');
  await (
    await fetch(url, {
      method: 'POST',
      headers: { ...H, 'mcp-session-id': sid },
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    })
  ).text();
  return sid;
}
async function call(sid, id) {
  const t = performance.now();
  const r = await fetch(url, {
    method: 'POST',
    headers: { ...H, 'mcp-session-id': sid },
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'test_simple_text', arguments: {} } }),
  });
  const text = await r.text();
  if (!text.includes('"result"')) throw new Error(text);
  return performance.now() - t;
}
const sids = [];
for (let i = 0; i < 200; i++) sids.push(await init());
const warm = [],
  cold = [];
// warm: two calls back to back right after waking (the second is on an awake session)
while (hib.hibernatedSessionCount < sids.length) await new Promise((r) => setTimeout(r, 50));
for (const [i, s] of sids.entries()) {
  cold.push(await call(s, 10 + i));
  warm.push(await call(s, 1000 + i));
}
const med = (a) => a.sort((x, y) => x - y)[a.length >> 1];
console.log(
  `tools/call over HTTP, median of ${sids.length}: awake ${med(warm).toFixed(2)} ms, waking a hibernated session ${med(cold).toFixed(2)} ms (+${(med(cold) - med(warm)).toFixed(2)} ms)`,
);
await hib.close();
srv.closeAllConnections();
srv.close();
