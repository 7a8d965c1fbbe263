/**
 * Every key and channel name mcp-kit uses in Redis, in one place (`docs/design.md`, "Redis
 * keyspace", says who writes each, how it is fenced and its TTL). All start with the prefix
 * (`mcp-kit:`).
 *
 * Laid out for Redis Cluster: every key of one session (its record and owner, its streams and
 * their retry hints, its registrations, its inbox, its channels) carries the session's hash tag
 * `{<session id>}`, and every key of one task the task's `{<task id>}`, so each script and each
 * transaction touches one slot. What is deployment-wide is a handful of small keys, each written
 * at most once per heartbeat per instance (`instance:<id>` spread over every instance, the
 * instances' index under its own tag), or once per data loss (`generation`, `hop-secret`); no
 * script reads one of them beside a session's keys.
 */
export class Keyspace {
  constructor(readonly prefix: string) {}

  /**
   * A session (a hash): `r` what restores it (its client's `initialize`, log level, subscriptions),
   * `p` its principal (none: no field), in a forwarding cluster `o`/`u`/`e` its owner (instance,
   * internal URL, Redis' time of the take-over; none: created there), and `c:<writer>.<n>` each
   * stream a writer registered (`[stream id, writer instance, request ids]`; a writer reuses its
   * fields as its streams end, so they are as many as its streams at once).
   */
  session(sessionId: string): string {
    return `${this.prefix}{${sessionId}}:s`;
  }

  /** One stream's frames (a Redis stream, or a string holding a stream's only frame); also the channel its appends are published on. */
  stream(sessionId: string, streamId: string): string {
    return `${this.prefix}{${sessionId}}:${streamId}`;
  }

  /** The retry of a stream's last `closeSSEStream`. */
  retry(sessionId: string, streamId: string): string {
    return `${this.prefix}{${sessionId}}:${streamId}:retry`;
  }

  /** That a client follows the session from another instance. */
  seen(sessionId: string): string {
    return `${this.prefix}{${sessionId}}:seen`;
  }

  /** A shared cluster's messages about the session (a Redis stream), for every instance holding a copy of it. */
  inbox(sessionId: string): string {
    return `${this.prefix}{${sessionId}}:inbox`;
  }

  /** Wakes the instances holding a copy of the session for a message in its inbox. */
  busChannel(sessionId: string): string {
    return `${this.prefix}{${sessionId}}:bus`;
  }

  /** The session id of a {@link busChannel}, or `undefined` for another channel. */
  sessionOfBusChannel(channel: string): string | undefined {
    if (!channel.startsWith(`${this.prefix}{`) || !channel.endsWith('}:bus')) return undefined;
    return channel.slice(this.prefix.length + 1, -'}:bus'.length);
  }

  /** An instance's internal URL, alive `3 × heartbeatMs` past its last beat. */
  instance(instanceId: string): string {
    return `${this.prefix}instance:${instanceId}`;
  }

  /** The instances' index (a sorted set): each one's last beat, in Redis' time. */
  instances(): string {
    return `${this.prefix}{instances}`;
  }

  /** The instances' internal URLs (a hash), beside their index. */
  instanceUrls(): string {
    return `${this.prefix}{instances}:urls`;
  }

  /**
   * An instance's presence in one shard of a Redis Cluster (`tag`: a hash tag in a slot of the
   * shard's master; see cluster/shards.ts), alive `3 × heartbeatMs` past its last beat. On one
   * Redis, {@link instance} is that.
   */
  presence(tag: string, instanceId: string): string {
    return `${this.prefix}{${tag}}:instance:${instanceId}`;
  }

  /** One shard's generation on a Redis Cluster (on one Redis, {@link generation}): a new one means the shard lost its data. */
  shardGeneration(tag: string): string {
    return `${this.prefix}{${tag}}:generation`;
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

  /** A task's record (a hash). */
  task(taskId: string): string {
    return `${this.prefix}task:{${taskId}}`;
  }

  /** A task's open questions (a hash). */
  taskInput(taskId: string): string {
    return `${this.prefix}task:{${taskId}}:input`;
  }

  /** A task's answers waiting for its owner (a list). */
  taskAnswers(taskId: string): string {
    return `${this.prefix}task:{${taskId}}:answers`;
  }

  /** Wakes the instance running tasks with an answer or a cancel. */
  taskSignals(instanceId: string): string {
    return `${this.prefix}tasks:${instanceId}`;
  }

  /** Every instance hears that a task changed here. */
  taskChanges(): string {
    return `${this.prefix}task-changes`;
  }

  /** Keys of the keyspace before 0.2 (no hash tag on a session's records or a task's keys, a set of a session's streams), read to carry live sessions and tasks across a rolling deploy. */
  readonly legacy = {
    owner: (sessionId: string) => `${this.prefix}owner:${sessionId}`,
    record: (sessionId: string) => `${this.prefix}restore:${sessionId}`,
    streams: (sessionId: string) => `${this.prefix}{${sessionId}}`,
    requests: (sessionId: string, streamId: string) => `${this.prefix}{${sessionId}}:${streamId}:req`,
    task: (taskId: string) => `${this.prefix}task:${taskId}`,
    taskInput: (taskId: string) => `${this.prefix}task:${taskId}:input`,
    taskAnswers: (taskId: string) => `${this.prefix}task:${taskId}:answers`,
  };
}
