/**
 * HIBERNATE_MS on every example app (one process of its build each, no Redis): with
 * `HIBERNATE_MS=0` an idle session's server is let go at the next sweep (every 100 ms), and its next
 * request is served by a new server brought back to where the old one was. The app logs each
 * restore, naming the client the new server knows; the session goes on as before for the client.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { EXAMPLE_APPS, instance, type Instance } from '@mcp-kit/testbed/cluster';
import { freePort } from '@mcp-kit/testbed/processes';
import { connectClient, type ClusterClient } from '@mcp-kit/testbed/clients';
import { oneTo } from '@mcp-kit/testbed/long-task';

let app: Instance | undefined;
let client: ClusterClient | undefined;

afterEach(async () => {
  await client?.close();
  await app?.stop('SIGKILL');
  client = app = undefined;
});

describe.each(EXAMPLE_APPS)('HIBERNATE_MS: %s', (name) => {
  it('HIBERNATE_MS=0: an idle session is restored for its next request, knowing the client, and goes on as before', async () => {
    app = instance('solo', await freePort(), { HIBERNATE_MS: '0', RETRY_MS: '50' }, name);
    await app.start();
    client = await connectClient(app.url, 'hibernate-e2e');
    const restored = app.waitFor(
      new RegExp(`restored session ${client.sessionId} for hibernate-e2e/1\\.0\\.0 \\(capabilities: ([^)]*)\\)`),
    );
    // Requests a little apart, so the session is idle at a sweep between two of them.
    let woke = false;
    void restored.then(() => (woke = true)).catch(() => {});
    const tools: string[][] = [];
    while (!woke) {
      tools.push((await client.client.listTools()).tools.map((t) => t.name));
      await Promise.race([restored, new Promise((resolve) => setTimeout(resolve, 150))]);
    }
    const [, capabilities] = await restored;
    expect(capabilities!.split(',').sort()).toEqual(['elicitation', 'sampling']);
    expect(tools.every((names) => names.includes('long_task'))).toBe(true);
    // The same session, polled across closes, on whichever server it has now.
    const result = await client.callLongTask({ steps: 6, intervalMs: 20, closeEvery: 2, retryMs: 20 });
    expect(result.content).toEqual([{ type: 'text', text: 'completed 6 steps' }]);
    expect(client.steps).toEqual(oneTo(6));
    expect(client.client.getServerVersion()?.name).toBe(`mcp-kit-${name}`);
  }, 30_000);
});
