/** A node:http server standing in for a fetch runtime (Deno, Bun, workers): each request handed to a fetch handler. */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';

/**
 * Serves a node request with a fetch handler, streaming the answer, as a fetch runtime would.
 * `origin`: what `request.url` starts with (default: from the Host header).
 */
export async function serveFetch(
  fetchHandler: (r: Request) => Promise<Response>,
  req: IncomingMessage,
  res: ServerResponse,
  origin = `http://${req.headers.host}`,
): Promise<void> {
  const aborted = new AbortController();
  res.on('close', () => aborted.abort());
  const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
  const request = new Request(`${origin}${req.url}`, {
    method: req.method,
    headers: req.headers as Record<string, string>,
    body: hasBody ? (Readable.toWeb(req) as ReadableStream<Uint8Array>) : undefined,
    signal: aborted.signal,
    ...(hasBody ? { duplex: 'half' } : {}),
  } as RequestInit);
  const response = await fetchHandler(request);
  res.writeHead(response.status, Object.fromEntries(response.headers));
  if (!response.body) return void res.end();
  try {
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) res.write(chunk);
  } catch {
    // The client left.
  }
  res.end();
}
