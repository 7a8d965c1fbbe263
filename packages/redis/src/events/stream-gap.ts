/**
 * A frame refused because its predecessor is not in the stream; `missingSeq` is the first frame
 * missing. Passing while that frame's own write is still on its way (the writer's first try of a
 * frame goes out at once, before the retry of one before it). For good once the writer had
 * `missingSeq` acknowledged: Redis lost it (a failover to a replica it had not reached yet,
 * replication being asynchronous), and every later frame of the stream is refused the same way.
 * The writer tells which; core knows this error by its name, as it knows `StreamTakenOver`.
 */
export class StreamGap extends Error {
  override readonly name = 'StreamGap';
  constructor(
    message: string,
    readonly missingSeq: number,
  ) {
    super(message);
  }
}
