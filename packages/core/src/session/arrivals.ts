/**
 * What is on its way to something that must not go while it is: requests that found a session and
 * have not opened their stream yet (the session looks idle meanwhile: no hibernation, cap or drain
 * lets it go), or, for the instance's drain, requests still looking for their session. Each holds
 * an {@link Arrival} from when it arrives until it is done, released in a `finally`; whoever waits
 * for them (`settled`) hears when the last one left.
 */
export class Arrivals {
  private count = 0;
  private readonly counted = (delta: 1 | -1): void => {
    this.count += delta;
    if (this.count === 0) this.settled?.();
  };

  /** A restore answering the lost calls of the instance the session came from (requests wait for it); `undefined` once done. */
  restoring: Promise<void> | undefined;

  constructor(
    /** Called each time the last arrival leaves. */
    private readonly settled?: () => void,
  ) {}

  get any(): boolean {
    return this.count > 0;
  }

  /** One more on its way: held until released. */
  arrive(): Arrival {
    return new Arrival(this.counted);
  }

  /** Runs `work` as one arrival. */
  async visit<T>(work: () => Promise<T>): Promise<T> {
    const arrival = this.arrive();
    try {
      return await work();
    } finally {
      arrival.release();
    }
  }

  /** Counts `work` (a restore answering lost calls) as one arrival until it settles; requests wait for it as {@link restoring}. */
  restore(work: Promise<void>): void {
    const arrival = this.arrive();
    const restoring = work.finally(() => {
      arrival.release();
      if (this.restoring === restoring) this.restoring = undefined;
    });
    this.restoring = restoring;
  }
}

/** One request on its way, counted by its {@link Arrivals} until {@link release}. */
export class Arrival {
  private held = true;

  constructor(private readonly counted: (delta: 1 | -1) => void) {
    counted(1);
  }

  /** The request is done here: it counts no more (idempotent, for a `finally`). */
  release(): void {
    if (!this.held) return;
    this.held = false;
    this.counted(-1);
  }

  /**
   * Runs `work`, which serves the request on another instance (a forward, a hand-over, a stream
   * followed from the shared store), without counting it meanwhile: nothing here waits for what
   * another instance does. Counted again after, while the request is still here.
   */
  async elsewhere<T>(work: () => Promise<T>): Promise<T> {
    if (!this.held) return work();
    this.release();
    try {
      return await work();
    } finally {
      this.held = true;
      this.counted(1);
    }
  }
}
