/**
 * What the engine reports as it works, for OpenTelemetry (see otel.ts) and for anything that
 * watches it (`McpHandler.observe`: a live page, logs, tests). Session and stream ids appear only
 * as non-reversible hashes; nothing here lets a reader resume a stream or join a session.
 */
export type EngineEvent =
  | RequestEvent
  | { type: 'session.open'; at: number; session: string; restored: boolean }
  | { type: 'session.close'; at: number; session: string; reason: SessionEndReason }
  | { type: 'session.hibernate'; at: number; session: string }
  | { type: 'session.wake'; at: number; session: string; ms: number }
  | StreamOpenEvent
  | StreamCloseEvent
  | { type: 'event'; at: number; session: string; stream: string; seq: number; bytes: number }
  | { type: 'cursor.evicted'; at: number; session: string; stream: string }
  | { type: 'forward'; at: number; session: string; to: string }
  | { type: 'store'; at: number; store: 'events' | 'tasks'; op: string; ms: number; ok: boolean }
  | { type: 'task'; at: number; task: string; status: string };

/** One HTTP request, reported when its response has started (a stream goes on after). */
export interface RequestEvent {
  type: 'request';
  at: number;
  durationMs: number;
  httpMethod: string;
  status: number;
  era?: 'legacy' | 'modern';
  mcpMethod?: string;
  tool?: string;
  session?: string;
}

/** Which connection of a stream: a POST's response, the GET stream, a resume here, a resume followed from another instance. */
export type StreamKind = 'post' | 'get' | 'resume' | 'remote';

export interface StreamOpenEvent {
  type: 'stream.open';
  at: number;
  session: string;
  stream: string;
  kind: StreamKind;
  /** A resume: the frames and bytes replayed from the store before going live. */
  replayed?: number;
  replayBytes?: number;
  /** A resume of a stream the server closed: how long the client stayed away (its polling interval). */
  awayMs?: number;
}

export interface StreamCloseEvent {
  type: 'stream.close';
  at: number;
  session: string;
  stream: string;
  kind: StreamKind;
  reason: CloseReason;
  /** The retry hint the connection ended with, when the server ended it. */
  retryMs?: number;
}

/**
 * Why a connection ended: `complete` (the answer went out), `server-close` (closeSSEStream, a
 * drain), `slow-reader` (past maxBufferedBytes), `replaced` (a newer connection for the stream),
 * `duration` (maxStreamDurationMs), `shutdown`, or `client` (the client went away).
 */
export type CloseReason = 'complete' | 'server-close' | 'slow-reader' | 'replaced' | 'duration' | 'shutdown' | 'client';

/**
 * Why a session closed on this instance. `deleted-elsewhere`: in a shared cluster, the client
 * deleted the session through another instance. `evict` (a cap made room) and `hibernate` (idle
 * past `hibernateAfterMs`): only this instance's copy went; where its record is kept (a cluster's
 * session records) the session lives on, and its next request restores it.
 */
export type SessionEndReason = 'delete' | 'deleted-elsewhere' | 'expire' | 'evict' | 'hibernate' | 'shutdown' | 'handoff' | 'error';
