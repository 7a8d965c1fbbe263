import type { RestoreRecord } from '@mcp-kit/core';

/** A session's hash (`<prefix>{<id>}:s`, see keyspace.ts) as both cluster modes read it. */
export interface SessionFields {
  /** Forwarding: the owning instance, its internal URL, and Redis' time it took the session over (none: it created it). */
  owner?: string;
  url?: string;
  epoch?: string;
  /** Whose session it is (none: no auth). */
  principal?: string;
  /** What restores it ({@link encodeRecord}), as stored. */
  record?: string;
  /** The streams registered in it. */
  streams: string[];
}

export function sessionFields(hash: Record<string, string>): SessionFields {
  const streams: string[] = [];
  for (const [name, value] of Object.entries(hash)) {
    if (!name.startsWith('c:')) continue;
    try {
      const streamId = (JSON.parse(value) as [string])[0];
      if (typeof streamId === 'string' && !streams.includes(streamId)) streams.push(streamId);
    } catch {
      // not a registration
    }
  }
  return { owner: hash.o, url: hash.u, epoch: hash.e, principal: hash.p, record: hash.r, streams };
}

/** What is stored of a {@link RestoreRecord}: its parts by one letter, without what every one repeats (`jsonrpc`, `method`). */
interface StoredRecord {
  /** The `initialize` request's id and params. */
  i: string | number;
  a?: Record<string, unknown>;
  /** The negotiated protocol version, the log level, the subscriptions. */
  v?: string;
  l?: Record<string, unknown>;
  s?: Record<string, unknown>[];
}

/** The record as the session's hash keeps it (field `r`): a few hundred bytes, the client's `initialize` params most of them. */
export function encodeRecord(record: RestoreRecord): string {
  const stored: StoredRecord = { i: record.initialize.id };
  if (record.initialize.params !== undefined) stored.a = record.initialize.params;
  if (record.protocolVersion !== undefined) stored.v = record.protocolVersion;
  if (record.loggingLevel !== undefined) stored.l = record.loggingLevel;
  if (record.subscriptions !== undefined) stored.s = record.subscriptions;
  return JSON.stringify(stored);
}

export function parseRecord(raw: string): RestoreRecord {
  const stored = JSON.parse(raw) as StoredRecord;
  const record: RestoreRecord = { initialize: { jsonrpc: '2.0', id: stored.i, method: 'initialize' } };
  if (stored.a !== undefined) record.initialize.params = stored.a;
  if (stored.v !== undefined) record.protocolVersion = stored.v;
  if (stored.l !== undefined) record.loggingLevel = stored.l;
  if (stored.s !== undefined) record.subscriptions = stored.s;
  return record;
}
