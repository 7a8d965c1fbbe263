// The event store behind the SDK v2 transport row. SDK v2 publishes no store (its sse-polling
// example imports one from an unpublished examples package), so this is the small one a user
// would write: one array per stream, ids `<stream>.<seq>`. A replay reads only the stream it
// resumes, so the row measures the v2 transport, not a slow store; nothing is ever evicted (as in
// the SDK v1 example store and the bare server).
import { randomUUID } from 'node:crypto';
import { FILL_EVENTS_PER_STREAM, FILL_MESSAGE } from './control.mjs';

export class StreamLogEventStore {
  /** streamId → messages; the message with seq n is at n - 1. */
  streams = new Map();

  async storeEvent(streamId, message) {
    return this.append(streamId, message);
  }

  async getStreamIdForEventId(eventId) {
    const streamId = streamOf(eventId);
    return this.streams.has(streamId) ? streamId : undefined;
  }

  async replayEventsAfter(lastEventId, { send }) {
    const streamId = streamOf(lastEventId);
    const log = this.streams.get(streamId);
    if (log === undefined) throw new Error(`unknown event id ${lastEventId}`);
    for (let seq = Number(lastEventId.slice(streamId.length + 1)) + 1; seq <= log.length; seq++) {
      await send(`${streamId}.${seq}`, log[seq - 1]);
    }
    return streamId;
  }

  append(streamId, message) {
    let log = this.streams.get(streamId);
    if (log === undefined) {
      log = [];
      this.streams.set(streamId, log);
    }
    log.push(message);
    return `${streamId}.${log.length}`;
  }

  /** `/bench/fill`: `events` filler events in streams of other (made-up) sessions. */
  fill(events) {
    for (let left = events; left > 0; left -= FILL_EVENTS_PER_STREAM) {
      const streamId = randomUUID();
      const n = Math.min(FILL_EVENTS_PER_STREAM, left);
      for (let seq = 1; seq <= n; seq++) this.append(streamId, { ...FILL_MESSAGE, params: { ...FILL_MESSAGE.params, seq } });
    }
    let total = 0;
    for (const log of this.streams.values()) total += log.length;
    return { events: total };
  }
}

/** Stream ids are UUIDs (no dot), so the stream is everything before the last dot. */
function streamOf(eventId) {
  return eventId.slice(0, eventId.lastIndexOf('.'));
}
