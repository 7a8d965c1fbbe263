// mcp-kit on Next.js (App Router), mounted the way the README says; served by `next start`.
import { getOrCreate, mcpNext } from '@mcp-kit/next';
import { trackResumeResponse } from '../../../control.mjs';
import { createKitHandler } from '../../../kit.mjs';

const kit = getOrCreate('bench', () => createKitHandler('bench-kit-next'));
const routes = mcpNext(kit.handler);

export const POST = routes.POST;
export const DELETE = routes.DELETE;
export async function GET(request) {
  if (!request.headers.get('last-event-id')) return routes.GET(request);
  const start = performance.now();
  return trackResumeResponse(await routes.GET(request), start);
}

export const runtime = 'nodejs';
export const dynamic = 'force-dynamic';
