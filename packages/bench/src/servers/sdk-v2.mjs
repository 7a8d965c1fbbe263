// SDK v2's sessionful transport as SEP-1699 users run it, following the SDK's examples/sse-polling:
// NodeStreamableHTTPServerTransport on the v2 Express app (createMcpExpressApp: express.json() and
// its Host check), an event store and a retry interval, one McpServer per session in a Map.
import { randomUUID } from 'node:crypto';
import { createMcpExpressApp } from '@modelcontextprotocol/express';
import { NodeStreamableHTTPServerTransport } from '@modelcontextprotocol/node';
import { exitOnSigterm, handleControl, trackResume } from './control.mjs';
import { StreamLogEventStore } from './event-store-v2.mjs';
import { serveSessions } from './sessions.mjs';
import { benchEnv } from './tools.mjs';
import { createBenchServerV2 } from './tools-v2.mjs';

const env = benchEnv();
const eventStore = new StreamLogEventStore();

const app = createMcpExpressApp();
app.use((req, res, next) => {
  if (handleControl(req, res, { fill: (events) => eventStore.fill(events), sessions: () => ({ sessions: sessions.size }) })) return;
  trackResume(req, res);
  next();
});
const sessions = serveSessions(app, {
  newTransport: (onsessioninitialized) =>
    new NodeStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore,
      retryInterval: env.retryMs,
      enableJsonResponse: env.json,
      onsessioninitialized,
    }),
  newServer: () => createBenchServerV2('bench-sdk-v2'),
});
const server = app.listen(env.port, env.host, () => console.log(`LISTENING ${server.address().port}`));
exitOnSigterm();
