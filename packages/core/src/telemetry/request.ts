import type { EngineContext } from '../engine/context.js';
import type { CoreRequest, CoreResponder, OutHeaders, SseSink } from '../ports/http.js';

/**
 * Serves a request through a responder that notes the answer's status, then reports the request
 * once its response has started (an SSE stream goes on after; its connection is reported apart).
 */
export async function observeRequest(
  ctx: EngineContext,
  req: CoreRequest,
  res: CoreResponder,
  serve: (res: CoreResponder) => Promise<void>,
): Promise<void> {
  const started = performance.now();
  const at = Date.now();
  let status = 0;
  const noting: CoreResponder = {
    send(s: number, headers: OutHeaders, body: string | undefined) {
      status ||= s;
      res.send(s, headers, body);
    },
    stream(headers: OutHeaders): SseSink {
      status ||= 200;
      return res.stream(headers);
    },
    onClose: res.onClose?.bind(res),
  };
  try {
    await serve(noting);
  } finally {
    const { telemetry } = ctx.options;
    const facts = ctx.facts.get(req);
    const sessionId = req.headers['mcp-session-id'];
    telemetry.emit({
      type: 'request',
      at,
      durationMs: performance.now() - started,
      httpMethod: req.method.toUpperCase(),
      status,
      ...facts,
      ...(typeof sessionId === 'string' ? { session: telemetry.hash(sessionId) } : {}),
    });
  }
}
