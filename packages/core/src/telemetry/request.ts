import type { EngineContext } from '../engine/context.js';
import type { CoreRequest, CoreResponder, OutHeaders, SseSink } from '../ports/http.js';

/**
 * Serves a request through a responder that notes the answer's status, then reports the request
 * once its response has started (an SSE stream goes on after; its connection is reported apart).
 * A 2026 request is answered after the engine let go of it (its server answers when its tool
 * ends): it is reported then, or when its client left first (status 0).
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
  let answered: (() => void) | undefined;
  const noting: CoreResponder = {
    send(s: number, headers: OutHeaders, body: string | undefined) {
      status ||= s;
      res.send(s, headers, body);
      answered?.();
    },
    stream(headers: OutHeaders): SseSink {
      status ||= 200;
      const sink = res.stream(headers);
      answered?.();
      return sink;
    },
    onClose: res.onClose?.bind(res),
  };
  const report = () => {
    answered = () => {};
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
  };
  try {
    await serve(noting);
  } finally {
    if (status !== 0 || !res.onClose) report();
    else {
      answered = report;
      res.onClose(() => answered?.());
    }
  }
}
