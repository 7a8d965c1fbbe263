import type { SseConnection } from '../streams/connection.js';
import type { StreamKind } from './events.js';
import type { TelemetryHub } from './hub.js';

/** Reports a connection of a stream: now that it opens (with what a resume replayed), and when it closes and why. */
export function watchConnection(
  hub: TelemetryHub,
  sessionId: string,
  streamId: string,
  conn: SseConnection,
  kind: StreamKind,
  resumed?: { replayed: number; replayBytes: number; awayMs?: number },
): void {
  if (!hub.on) return;
  const session = hub.hash(sessionId);
  const stream = hub.hash(streamId);
  hub.emit({ type: 'stream.open', at: Date.now(), session, stream, kind, ...resumed });
  conn.onClose(() => {
    const event = { type: 'stream.close' as const, at: Date.now(), session, stream, kind, reason: conn.closeReason ?? ('client' as const) };
    hub.emit(conn.closeRetryMs === undefined ? event : { ...event, retryMs: conn.closeRetryMs });
  });
}

/** The frames and bytes of a replay, for the telemetry of a resume. */
export function replayed(frames: readonly string[]): { replayed: number; replayBytes: number } {
  let bytes = 0;
  for (const frame of frames) bytes += frame.length;
  return { replayed: frames.length, replayBytes: bytes };
}
