// The SDK's own transport as SEP-1699 users run it: StreamableHTTPServerTransport on Express, an
// event store and a retry interval, one McpServer per session. Follows the SDK's
// examples/server/ssePollingExample (one InMemoryEventStore for the process, sessions in a Map).
import { randomUUID } from 'node:crypto';
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';
import { createMcpExpressApp } from '@modelcontextprotocol/sdk/server/express.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { FILL_EVENTS_PER_STREAM, FILL_MESSAGE, exitOnSigterm, handleControl, trackResume } from './control.mjs';
import { serveSessions } from './sessions.mjs';
import { benchEnv, createBenchServer } from './tools.mjs';

const env = benchEnv();
const eventStore = new InMemoryEventStore();

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
serveSessions(app, {
  newTransport: (onsessioninitialized) =>
    new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore,
      retryInterval: env.retryMs,
      enableJsonResponse: env.json,
      onsessioninitialized,
    }),
  newServer: () => createBenchServer('bench-sdk'),
});
const server = app.listen(env.port, env.host, () => console.log(`LISTENING ${server.address().port}`));
exitOnSigterm();
