/**
 * Every key and channel name mcp-kit uses in Redis, in one place (`docs/design.md`, "Redis
 * keyspace", says who writes each and how it is fenced). All start with the prefix (`mcp-kit:`).
 */
export class Keyspace {
  constructor(readonly prefix: string) {}

  /** A session's owner record (forwarding): `{i, u, p, e}`. */
  owner(sessionId: string): string {
    return `${this.prefix}owner:${sessionId}`;
  }

  /** What restores a session on another instance: `{p, r}`. */
  record(sessionId: string): string {
    return `${this.prefix}restore:${sessionId}`;
  }

  /** That a client follows the session from another instance. */
  seen(sessionId: string): string {
    return `${this.prefix}seen:${sessionId}`;
  }

  /** The set of a session's stream ids. */
  streams(sessionId: string): string {
    return `${this.prefix}{${sessionId}}`;
  }

  /** One stream's frames; also the channel its appends are published on. */
  stream(sessionId: string, streamId: string): string {
    return `${this.prefix}{${sessionId}}:${streamId}`;
  }

  /** What every stream key of a session starts with. */
  streamPrefix(sessionId: string): string {
    return `${this.prefix}{${sessionId}}:`;
  }

  /** An instance's internal URL, alive `3 × heartbeatMs` past its last beat. */
  instance(instanceId: string): string {
    return `${this.prefix}instance:${instanceId}`;
  }

  /** The instances' sorted set: each one's last beat, in Redis' time. */
  instances(): string {
    return `${this.prefix}instances`;
  }

  /** Sessions a peer took back from the instance after Redis lost its data. */
  taken(instanceId: string): string {
    return `${this.prefix}taken:${instanceId}`;
  }

  /** A random id of Redis' data: a new one means Redis lost its data. */
  generation(): string {
    return `${this.prefix}generation`;
  }

  /** What instances sign the requests they forward or hand over with. */
  hopSecret(): string {
    return `${this.prefix}hop-secret`;
  }

  /** A shared cluster's bus: the inbox of instance `to` (`'*'`: every instance's). */
  inbox(to: string): string {
    return `${this.prefix}inbox:${to}`;
  }

  /** The channel that wakes instance `to` (`'*'`: every instance) for a message in its inbox. */
  busChannel(to: string): string {
    return `${this.prefix}bus:${to}`;
  }

  /** A task's record (a hash). */
  task(taskId: string): string {
    return `${this.prefix}task:${taskId}`;
  }

  /** A task's open questions (a hash). */
  taskInput(taskId: string): string {
    return `${this.prefix}task:${taskId}:input`;
  }

  /** A task's answers waiting for its owner (a list). */
  taskAnswers(taskId: string): string {
    return `${this.prefix}task:${taskId}:answers`;
  }

  /** Wakes the instance running tasks with an answer or a cancel: `<prefix>tasks:<instance>`. */
  taskSignals(instanceId: string): string {
    return `${this.prefix}tasks:${instanceId}`;
  }

  /** Every instance hears that a task changed here. */
  taskChanges(): string {
    return `${this.prefix}task-changes`;
  }
}
