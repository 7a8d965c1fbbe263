// SDK v2's sessionful transport as SEP-1699 users run it, following the SDK's examples/sse-polling:
// NodeStreamableHTTPServerTransport on the v2 Express app (createMcpExpressApp: express.json() and
// its Host check), an event store and a retry interval, one McpServer per session in a Map.
import { randomUUID } from 'node:crypto';
import { createMcpExpressApp } from '@modelcontextprotocol/express';
import { NodeStreamableHTTPServerTransport } from '@modelcontextprotocol/node';
import { isInitializeRequest } from '@modelcontextprotocol/server';
import { exitOnSigterm, handleControl, trackResume } from './control.mjs';
import { StreamLogEventStore } from './event-store-v2.mjs';
import { benchEnv } from './tools.mjs';
import { createBenchServerV2 } from './tools-v2.mjs';

const env = benchEnv();
const eventStore = new StreamLogEventStore();
const sessions = new Map();

const app = createMcpExpressApp();
app.use((req, res, next) => {
  if (handleControl(req, res, { fill: (events) => eventStore.fill(events), sessions: () => ({ sessions: sessions.size }) })) return;
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
    res.status(400).json({ jsonrpc: '2.0', error: { code: -32000, message: 'Bad Request: Session ID required' }, id: null });
    return;
  }
  const created = new NodeStreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    eventStore,
    retryInterval: env.retryMs,
    enableJsonResponse: env.json,
    onsessioninitialized: (id) => sessions.set(id, created),
  });
  created.onclose = () => {
    if (created.sessionId) sessions.delete(created.sessionId);
  };
  await createBenchServerV2('bench-sdk-v2').connect(created);
  await created.handleRequest(req, res, req.body);
});
const server = app.listen(env.port, env.host, () => console.log(`LISTENING ${server.address().port}`));
exitOnSigterm();
