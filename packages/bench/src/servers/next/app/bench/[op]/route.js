// The benchmark's control plane for the Next server (see ../../../../control.mjs).
import { getOrCreate } from '@mcp-kit/next';
import { stats, takeResumeTimings } from '../../../../control.mjs';
import { createKitHandler } from '../../../../kit.mjs';

const kit = getOrCreate('bench', () => createKitHandler('bench-kit-next'));
const json = (body, status = 200) => Response.json(body, { status });

export async function GET(request, { params }) {
  const { op } = await params;
  const url = new URL(request.url);
  if (op === 'stats') return json(stats(!url.searchParams.has('nogc')));
  if (op === 'resume-timings') return json({ timings: takeResumeTimings() });
  return json({ error: `unknown control path ${op}` }, 404);
}

export async function POST(request, { params }) {
  const { op } = await params;
  if (op !== 'fill') return json({ error: `unknown control path ${op}` }, 404);
  const events = Number(new URL(request.url).searchParams.get('events') ?? 0);
  const started = performance.now();
  const filled = kit.fill(events);
  return json({ events, ms: performance.now() - started, ...filled });
}

export const runtime = 'nodejs';
export const dynamic = 'force-dynamic';
