// One recompute at a time, level-triggered: schedule() asks for a run; calls within the coalescing window become
// one run, a call during a run makes one more after it, and a failed run is tried again with backoff (500 ms
// doubling to 30 s by default). The node agent's nft tables (Services, hostPorts) are kept this way.

export interface CoalescedRunnerOptions {
  /** The recompute; a rejection is reported to onError and retried. */
  run: () => Promise<void>;
  onError: (e: Error) => void;
  /** Calls within this window are one run; default 20 ms. */
  coalesceMs?: number;
  /** The first retry's delay, doubling up to 30 s; default 500 ms. */
  retryMs?: number;
}

export class CoalescedRunner {
  private enabled = false;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private current: Promise<void> | undefined;
  private dirty = false;
  private retryMs: number;

  constructor(private readonly o: CoalescedRunnerOptions) {
    this.retryMs = o.retryMs ?? 500;
  }

  /** Whether a run is under way. */
  get running(): boolean {
    return this.current !== undefined;
  }

  /** Runs are scheduled from now on (before, schedule() does nothing: the inputs are not complete yet). */
  enable(): void {
    if (!this.stopped) this.enabled = true;
  }

  schedule(delay = this.o.coalesceMs ?? 20): void {
    if (!this.enabled || this.stopped) return;
    if (this.current) {
      this.dirty = true;
      return;
    }
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.current = this.once().finally(() => {
        this.current = undefined;
        if (this.dirty) {
          this.dirty = false;
          this.schedule();
        }
      });
    }, delay);
  }

  /** Resolves once every run asked for so far has ended. For tests and shutdown. */
  async settled(): Promise<void> {
    while (this.timer || this.current) {
      await this.current;
      if (this.timer) await new Promise((r) => setTimeout(r, 5));
    }
  }

  /** No run starts from now on; resolves when the one under way (if any) has ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.current;
  }

  private async once(): Promise<void> {
    try {
      await this.o.run();
      this.retryMs = this.o.retryMs ?? 500;
    } catch (e) {
      this.o.onError(e as Error);
      const wait = this.retryMs;
      this.retryMs = Math.min(this.retryMs * 2, 30_000);
      setTimeout(() => this.schedule(0), wait).unref();
    }
  }
}
