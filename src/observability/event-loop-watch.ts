// The liveness of a Node.js process: its event loop must keep turning. A timer ticks every intervalMs and
// records how late it ran; the check fails while the latest tick ran more than maxLagMs late, or when no
// tick has run for maxLagMs past its due time (the loop is stuck, and only a probe answered from another
// phase, or a check with its own timeout, notices). One slow tick after a long pause (a GC, a huge list) is
// forgotten at the next on-time tick, so only a loop that stays blocked gets the process restarted.

export interface EventLoopWatchOptions {
  /** Default 1 s. */
  intervalMs?: number;
  /** Lag above which the loop counts as blocked. Default 10 s. */
  maxLagMs?: number;
  /** The clock; tests pass their own. */
  now?: () => number;
}

export class EventLoopWatch {
  private readonly intervalMs: number;
  private readonly maxLagMs: number;
  private readonly now: () => number;
  private timer: NodeJS.Timeout | undefined;
  private lastTick: number;
  private lastLag = 0;

  constructor(opts: EventLoopWatchOptions = {}) {
    this.intervalMs = opts.intervalMs ?? 1000;
    this.maxLagMs = opts.maxLagMs ?? 10_000;
    this.now = opts.now ?? Date.now;
    this.lastTick = this.now();
  }

  start(): void {
    if (this.timer) return;
    this.lastTick = this.now();
    this.timer = setInterval(() => this.tick(), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One timer run; public so that a test can drive the watch with its own clock. */
  tick(): void {
    const now = this.now();
    this.lastLag = Math.max(0, now - this.lastTick - this.intervalMs);
    this.lastTick = now;
  }

  /** A HealthCheck: true while the loop turns, else why not. */
  check = (): true | string => {
    const overdue = this.now() - this.lastTick - this.intervalMs;
    if (overdue > this.maxLagMs)
      return `the event loop has not run a timer for ${overdue} ms past its due time`;
    if (this.lastLag > this.maxLagMs) return `the event loop ran its last timer ${this.lastLag} ms late`;
    return true;
  };
}
