import type { EngineEvent } from './events.js';

export type EngineListener = (event: EngineEvent) => void;

type SessionEventType = 'session.open' | 'session.close' | 'session.hibernate' | 'session.wake';

/**
 * Where the engine's events go. Every emit site checks {@link on} first, so with no listener an
 * event costs one property read: no object is built, no clock read.
 */
export class TelemetryHub {
  /** Whether anybody listens. */
  on = false;
  private readonly listeners = new Set<EngineListener>();
  private readonly salt = Math.floor(Math.random() * 0xffffffff);
  private readonly hashes = new Map<string, string>();

  constructor(private readonly onError: (error: Error) => void) {}

  subscribe(listener: EngineListener): () => void {
    this.listeners.add(listener);
    this.on = true;
    return () => {
      this.listeners.delete(listener);
      this.on = this.listeners.size > 0;
    };
  }

  emit(event: EngineEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (error) {
        // A listener's bug must not break serving.
        this.onError(error instanceof Error ? error : new Error(String(error)));
      }
    }
  }

  /** Emits a session's event, stamped with the time and the session's hash. */
  sessionEvent<T extends SessionEventType>(
    type: T,
    sessionId: string,
    fields: Omit<Extract<EngineEvent, { type: T }>, 'type' | 'at' | 'session'>,
  ): void {
    this.emit({ type, at: Date.now(), session: this.hash(sessionId), ...fields } as EngineEvent);
  }

  /**
   * A short stand-in for a session or stream id: 64 bits of a salted FNV-1a hash. Ids carry 128
   * random bits, so the hash cannot give one back, and the salt (per process) keeps hashes from
   * being matched across processes.
   */
  hash(id: string): string {
    let cached = this.hashes.get(id);
    if (cached !== undefined) return cached;
    let h1 = 0x811c9dc5 ^ this.salt;
    let h2 = 0x01000193 ^ (this.salt >>> 7);
    for (let i = 0; i < id.length; i++) {
      const c = id.charCodeAt(i);
      h1 = Math.imul(h1 ^ c, 0x01000193);
      h2 = Math.imul(h2 ^ c, 0x811c9dc5) ^ (h1 >>> 13);
    }
    cached = (h1 >>> 0).toString(16).padStart(8, '0') + (h2 >>> 0).toString(16).padStart(8, '0');
    // Bounded: a cache, not a registry.
    if (this.hashes.size >= 10_000) this.hashes.clear();
    this.hashes.set(id, cached);
    return cached;
  }
}
