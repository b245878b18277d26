// Runs operations one at a time per key, different keys in parallel: ADD, DEL and CHECK of one pod must not
// interleave (a DEL racing an ADD could remove the port the ADD just made), while pods proceed independently.

export class KeyedLock {
  private readonly tails = new Map<string, Promise<unknown>>();

  /** Keys with an operation running or queued. */
  get busyKeys(): IterableIterator<string> {
    return this.tails.keys();
  }

  isBusy(key: string): boolean {
    return this.tails.has(key);
  }

  run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key) ?? Promise.resolve();
    const run = prev.then(fn, fn);
    const tail = run.then(
      () => {},
      () => {},
    );
    this.tails.set(key, tail);
    void tail.then(() => {
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return run;
  }
}
