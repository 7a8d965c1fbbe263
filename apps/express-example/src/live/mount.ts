import { Router } from 'express';
import type { McpHandler } from '@mcp-kit/core';
import { LiveFeed, type LiveFeedOptions } from './feed.js';
import page from './page.html';

/**
 * Serves the live page at `/mcp-kit/live` and its feed at `/mcp-kit/live/events`. The feed watches
 * `handler` from now on (which turns the engine's event reporting on); it ends its browsers'
 * connections on SIGTERM and SIGINT, so they do not hold a graceful shutdown open.
 */
export function mountLivePage(
  app: { use(path: string, router: Router): unknown },
  handler: McpHandler,
  options?: LiveFeedOptions,
): LiveFeed {
  const feed = new LiveFeed(handler, options);
  const router = Router();
  router.get('/', (_req, res) => {
    res.type('html').set('cache-control', 'no-cache').send(page);
  });
  router.get('/events', (req, res) => feed.serve(req, res));
  app.use('/mcp-kit/live', router);
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.once(signal, () => feed.close());
  return feed;
}
