/**
 * What is on its way to a session while it looks idle (no stream open, no call running): its
 * `initialize` being served, requests that found it and have not opened their stream yet, a
 * restore answering the lost calls of the instance it came from. A session with any of them is not
 * idle: no hibernation, cap or drain lets it go meanwhile.
 */
export class Arrivals {
  /** Its `initialize` is being served: created, its stream not open yet. */
  opening = false;
  /** Requests being served that found the session (see {@link visit}). */
  private visits = 0;
  /** While restoring: the lost calls of the gone instance are being answered (requests wait for it); `undefined` once done. */
  adopting: Promise<void> | undefined;

  get any(): boolean {
    return this.opening || this.visits > 0 || this.adopting !== undefined;
  }

  /** Serves a request that found the session: while `work` runs, the session is not idle. */
  async visit<T>(work: () => Promise<T>): Promise<T> {
    this.visits++;
    try {
      return await work();
    } finally {
      this.visits--;
    }
  }
}
