import type { Redis } from 'ioredis';

/**
 * The streams this instance still writes to (created, final frame not stored yet): their keys
 * live `streamTtlMs` past their last append, so a tool that lets go of its client
 * (`closeSSEStream(ctx, 10_000)`) and then works in silence for longer, or a quiet standalone
 * `GET` stream, would lose its log and its client's polls would get `404`. Their TTL is refreshed
 * here every third of it, in one pipeline, for as long as this instance writes to them
 * (issue 20, item 2). An instance that dies stops refreshing, so its keys still age out.
 *
 * A stream leaves with its final frame, or when the engine lets it go (`EventStore.letGo`: its
 * requests cancelled, never put on the wire, or its session ended or let go here), so this holds
 * only the streams still written here, however many were opened and abandoned (issue 27, item 8).
 */
export class LiveStreams {
  /** Stream keys by session, with the session's index key. */
  private readonly sessions = new Map<string, { index: string; streams: Set<string> }>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private refreshing = false;

  constructor(
    private readonly client: Redis,
    private readonly ttlMs: number,
  ) {}

  add(sessionId: string, index: string, stream: string): void {
    let session = this.sessions.get(sessionId);
    if (!session) this.sessions.set(sessionId, (session = { index, streams: new Set() }));
    session.streams.add(stream);
    this.timer ??= setInterval(() => void this.refresh(), Math.max(Math.floor(this.ttlMs / 3), 10));
    this.timer.unref?.();
  }

  remove(sessionId: string, stream: string): void {
    const session = this.sessions.get(sessionId);
    if (!session?.streams.delete(stream) || session.streams.size > 0) return;
    this.removeSession(sessionId);
  }

  removeSession(sessionId: string): void {
    this.sessions.delete(sessionId);
    if (this.sessions.size > 0 || !this.timer) return;
    clearInterval(this.timer);
    this.timer = undefined;
  }

  get size(): number {
    let n = 0;
    for (const s of this.sessions.values()) n += s.streams.size;
    return n;
  }

  close(): void {
    this.sessions.clear();
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One pipeline for every live stream; a failure waits for the next round (a third of the TTL later). */
  private async refresh(): Promise<void> {
    if (this.refreshing || this.client.status !== 'ready') return;
    this.refreshing = true;
    try {
      const pipeline = this.client.pipeline();
      for (const { index, streams } of this.sessions.values()) {
        pipeline.pexpire(index, this.ttlMs);
        for (const stream of streams) {
          pipeline.pexpire(stream, this.ttlMs);
          pipeline.pexpire(`${stream}:req`, this.ttlMs);
          pipeline.pexpire(`${stream}:retry`, this.ttlMs);
        }
      }
      await pipeline.exec();
    } catch {
      // Redis is down: the keys' own TTL still holds for a while; the next round tries again.
    } finally {
      this.refreshing = false;
    }
  }
}
