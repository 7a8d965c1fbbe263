// The client of tests/packaging/packed-install.test.ts's two Redis-backed instances, run from the
// scratch install: an SDK v1 client calls `report`, whose tool closes the stream mid-call. The
// client switches instance as a load balancer without affinity may: its POSTs go to the first URL
// given, its resumes (a GET with Last-Event-ID, SEP-1699) to the second. Prints one JSON line: the
// result's text, the log messages received, and which instance served each request.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

const [first, second] = process.argv.slice(2);
const served = [];
/** Resumes to the second instance, everything else to the first. */
async function switching(input, init = {}) {
  const method = init.method ?? 'GET';
  const resume = method === 'GET' && new Headers(init.headers).has('last-event-id');
  const url = new URL(input instanceof Request ? input.url : String(input));
  const response = await fetch(new URL(`${url.pathname}${url.search}`, resume ? second : first), init);
  const rpc = typeof init.body === 'string' ? JSON.parse(init.body).method : undefined;
  served.push({ method, rpc, resume, by: response.headers.get('x-served-by') });
  return response;
}

const client = new Client({ name: 'packed-install-redis', version: '1.0.0' });
const logs = [];
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logs.push(n.params.data));
const transport = new StreamableHTTPClientTransport(new URL(first), { fetch: switching });
await client.connect(transport);
const result = await client.callTool({ name: 'report', arguments: { month: 'May' } });
await transport.terminateSession();
await client.close();
console.log(JSON.stringify({ text: result.content[0].text, logs, served }));
