/**
 * The live page of apps/express-example (`/mcp-kit/live`), in a real headless Chromium (Debian's
 * `chromium`, driven by playwright-core; `npm test` installs it when missing): while the SDK client
 * runs a polling `long_task` against the built app, the page must show the server's closes with
 * their retry, the client's returns with the measured time away and what was replayed, and the
 * result. Screenshot: results/live-page.png (and docs/live-page.png with WRITE_DOCS_SCREENSHOT=1).
 * Also: the feed and the page stay bounded however much happens.
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import express from 'express';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { createMcpHandler } from '@mcp-kit/core';
import { mcpExpress } from '@mcp-kit/express';
import { createFixtureServer } from '@mcp-kit/fixtures';
import { LiveFeed } from '../../apps/express-example/src/live/feed.js';
import { instance, type Instance } from '@mcp-kit/testbed/cluster';
import { http, openSession } from '@mcp-kit/testbed/fetch-client';
import { freePort } from '@mcp-kit/testbed/processes';

const root = fileURLToPath(new URL('../../', import.meta.url));
const CHROMIUM = '/usr/bin/chromium';
// A step every 150 ms, a close every 4 steps asking for 400 ms: two or three steps are stored while
// the client is away and replayed when it comes back, and the call runs on live after each return.
const CALL = { steps: 12, intervalMs: 150, closeEvery: 4, retryMs: 400 };

describe('the live page in Chromium', () => {
  let server: Instance;
  let context: BrowserContext;
  let page: Page;
  let profile: string;

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: \`npm test\` installs it (apt-get install chromium)`);
    server = instance('live-page', await freePort(), {}, 'express-example');
    await server.start();
    profile = mkdtempSync(join(tmpdir(), 'mcp-kit-chromium-'));
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      viewport: { width: 1360, height: 560 },
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    page = context.pages()[0] ?? (await context.newPage());
  }, 60_000);

  afterAll(async () => {
    await context?.close();
    if (server) await server.stop('SIGTERM');
    if (profile) rmSync(profile, { recursive: true, force: true });
  });

  it('shows the closes with their retry, the returns with the time away and what was replayed, and the result', async () => {
    await page.goto(`${new URL(server.url).origin}/mcp-kit/live`);
    await page.locator('#status', { hasText: 'live' }).waitFor();

    const client = new Client({ name: 'live-page-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(server.url)));
    const result = await client.callTool({ name: 'long_task', arguments: CALL });
    expect(result.content).toEqual([{ type: 'text', text: 'completed 12 steps' }]);

    const lane = page.locator('.lane', { hasText: 'POST tools/call long_task' });
    await lane.locator('.result', { hasText: '✓ result' }).waitFor();
    const closes = lane.locator('.close[data-reason="server-close"]');
    await expect.poll(() => closes.count()).toBe(2);
    expect(await closes.allInnerTexts()).toEqual(['retry 400 ms', 'retry 400 ms']);
    const gaps = lane.locator('.gap');
    expect(await gaps.count()).toBe(2);
    for (const gap of await gaps.all()) {
      const away = Number(await gap.getAttribute('data-away-ms'));
      // The client waits the retry it was given, and is back soon after.
      expect(away).toBeGreaterThanOrEqual(400);
      expect(away).toBeLessThan(3000);
      expect(await gap.innerText()).toBe(`away ${away} ms`);
    }
    const replays = await lane.locator('.replay').allInnerTexts();
    expect(replays).toHaveLength(2);
    // The step 150 ms after each close is stored before the client can be back (400 ms).
    for (const r of replays) expect(Number(/↺ (\d+) replayed/.exec(r)![1])).toBeGreaterThanOrEqual(1);
    expect(await lane.locator('.conn.resume').count()).toBe(2);
    expect(await lane.locator('.tick.stored').count()).toBeGreaterThanOrEqual(2);
    expect(await lane.locator('.tick.live').count()).toBeGreaterThanOrEqual(4);
    expect(await page.locator('#s-closes').innerText()).toBe('2');
    expect(await page.locator('#s-resumes').innerText()).toBe('2');
    await expect.poll(() => page.locator('#log li', { hasText: 'client back after' }).count()).toBe(2);

    mkdirSync(join(root, 'results'), { recursive: true });
    const shot = join(root, 'results', 'live-page.png');
    await page.screenshot({ path: shot });
    if (process.env.WRITE_DOCS_SCREENSHOT === '1') copyFileSync(shot, join(root, 'docs', 'live-page.png'));
    await client.close();
  }, 60_000);

  it('keeps the page bounded: sessions, lanes, segments and the log are capped', async () => {
    const sizes = await page.evaluate(() => {
      const now = Date.now();
      for (let s = 0; s < 300; s++) {
        const session = `s${s}`.padEnd(16, '0');
        (window as any).apply({ type: 'session.open', at: now, session, restored: false });
        for (let l = 0; l < 30; l++) {
          const stream = `${session}-${l}`;
          for (let c = 0; c < 5; c++) {
            (window as any).apply({
              type: 'stream.open',
              at: now,
              session,
              stream,
              kind: c === 0 ? 'post' : 'resume',
              replayed: 1,
              replayBytes: 10,
            });
            (window as any).apply({ type: 'events', at: now, session, stream, count: 3, bytes: 300, lastSeq: c });
            (window as any).apply({
              type: 'stream.close',
              at: now,
              session,
              stream,
              kind: c === 0 ? 'post' : 'resume',
              reason: 'server-close',
              retryMs: 10,
            });
          }
        }
      }
      // The page's own state (top-level `const state` of its script).
      const st = (0, eval)('state');
      let lanes = 0;
      let segs = 0;
      for (const s of st.sessions.values()) {
        lanes = Math.max(lanes, s.lanes.size);
        for (const l of s.lanes.values()) segs = Math.max(segs, l.segs.length, l.ticks.length);
      }
      return { sessions: st.sessions.size, lanes, segs, log: st.log.length };
    });
    expect(sizes).toEqual({ sessions: 20, lanes: 10, segs: 5, log: 200 });
    await expect.poll(() => page.locator('.session').count()).toBeLessThanOrEqual(20);
    expect(await page.locator('#log li').count()).toBeLessThanOrEqual(200);
  });
});

describe('the live feed', () => {
  it('holds at most `history` items and sends a new browser only those', async () => {
    const handler = createMcpHandler({ server: () => createFixtureServer() });
    const feed = new LiveFeed(handler, { history: 50, flushMs: 10 });
    const web = express();
    web.get('/events', (req, res) => feed.serve(req, res));
    web.use('/mcp', mcpExpress(handler));
    const httpServer = createServer(web);
    await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', resolve));
    const origin = `http://127.0.0.1:${(httpServer.address() as { port: number }).port}`;
    try {
      // Each session: open, its initialize stream opens and closes, two requests: far more than 50 items.
      for (let i = 0; i < 20; i++) await openSession(http(`${origin}/mcp`));
      await expect.poll(() => feed.held, { timeout: 5_000 }).toBe(50);
      const res = await fetch(`${origin}/events`);
      const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
      let text = '';
      let data: RegExpExecArray | null;
      while (!(data = /\ndata: (.*)\n\n/.exec(text))) text += (await reader.read()).value;
      const first = JSON.parse(data[1]!);
      expect(first.reset).toBe(true);
      expect(first.items).toHaveLength(50);
      await reader.cancel();
    } finally {
      feed.close();
      await handler.close();
      httpServer.closeAllConnections();
      await new Promise<void>((resolve) => httpServer.close(() => resolve()));
    }
  });
});
