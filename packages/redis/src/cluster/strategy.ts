import type { RedisClient } from '../client.js';
import type { RestoreRecord } from '@mcp-kit/core';
import type { Keyspace } from '../keyspace.js';
import type { Beat, InstanceRegistry } from './registry.js';

/** What both modes are built on: the connection, the keyspace, this instance in Redis, and the engine's listener. */
export interface ClusterContext {
  readonly client: RedisClient;
  readonly keys: Keyspace;
  readonly registry: InstanceRegistry;
  /** Tells the engine to let go of its copy of a session: it is not this instance's to serve any more (see `SessionDirectory.onLetGo`). */
  lost(sessionId: string): void;
  /** A check before a request is served waits at most this long (then 503). */
  readonly checkTimeoutMs: number;
}

/** A change of the client to a session's record (`SessionDirectory.saveRecord`). */
export type RecordChange = { method: string; params?: Record<string, unknown> };

/**
 * How the instances of one cluster mode keep the session directory, picked once by
 * `RedisSessionCluster`: forwarding (`Owners`: each session has an owner, the others forward to
 * it; they are the port's `SessionOwners` too) or shared (`Copies`: any instance serves a copy
 * restored from the record; the port's `SessionCopies`). What both need lives in the
 * {@link ClusterContext}; nothing below this asks which mode it is in.
 */
export interface ClusterStrategy {
  open(sessionId: string, principal: string | undefined): Promise<void>;
  end(sessionId: string): Promise<boolean>;
  saveRecord(sessionId: string, record: RestoreRecord, ttlMs: number, change?: RecordChange): Promise<void>;
  /** The records of `sessionIds` were kept alive for `ttlMs` more. */
  kept(sessionIds: string[], ttlMs: number): void;
  letGo(sessionId: string): Promise<void>;
  confirmHeld(): Promise<void> | undefined;
  /** Sessions a peer took back after Redis lost its data (see the registry's beat). */
  taken(sessionIds: string[]): void;
  /** At each beat, once the registry's own writes went through. */
  beat(beat: Beat): Promise<void>;
  /** At each heartbeat timer, with the time since the one before. */
  tick(sinceLastTickMs: number): void;
  /** Lets go of everything held here (the instance is closing). */
  close(): Promise<void>;
}

/** Adds `sessionId` to a set that keeps the 10,000 latest. */
export function remember(set: Set<string>, sessionId: string): void {
  set.add(sessionId);
  if (set.size > 10_000) set.delete(set.values().next().value!);
}
