// The SDK's own transport as SEP-1699 users run it: StreamableHTTPServerTransport on Express, an
// event store and a retry interval, one McpServer per session. Follows the SDK's
// examples/server/ssePollingExample (one InMemoryEventStore for the process, sessions in a Map).
import { randomUUID } from 'node:crypto';
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { FILL_EVENTS_PER_STREAM, FILL_MESSAGE, exitOnSigterm, handleControl, trackResume } from './control.mjs';
import { benchEnv, createBenchServer } from './tools.mjs';

const env = benchEnv();
const eventStore = new InMemoryEventStore();
const sessions = new Map();

async function fill(events) {
  let left = events;
  while (left > 0) {
    const streamId = randomUUID();
    const n = Math.min(FILL_EVENTS_PER_STREAM, left);
    for (let seq = 1; seq <= n; seq++) {
      await eventStore.storeEvent(streamId, { ...FILL_MESSAGE, params: { ...FILL_MESSAGE.params, seq } });
    }
    left -= n;
  }
  return { events: eventStore.events.size };
}

const app = createMcpExpressApp();
app.use((req, res, next) => {
  if (handleControl(req, res, { fill })) return;
  trackResume(req, res);
  next();
});
app.all('/mcp', async (req, res) => {
  const sessionId = req.headers['mcp-session-id'];
  const transport = sessionId ? sessions.get(sessionId) : undefined;
  if (transport) {
    await transport.handleRequest(req, res, req.body);
    return;
  }
  if (sessionId) {
    res.status(404).json({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null });
    return;
  }
  if (!isInitializeRequest(req.body)) {
    res.status(400).json({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: No valid session ID provided' }, id: null });
    return;
  }
  const created = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    eventStore,
    retryInterval: env.retryMs,
    enableJsonResponse: env.json,
    onsessioninitialized: (id) => sessions.set(id, created),
  });
  created.onclose = () => {
    if (created.sessionId) sessions.delete(created.sessionId);
  };
  await createBenchServer('bench-sdk').connect(created);
  await created.handleRequest(req, res, req.body);
});
const server = app.listen(env.port, env.host, () => console.log(`LISTENING ${server.address().port}`));
exitOnSigterm();
