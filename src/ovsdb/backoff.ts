// Reconnect delays: exponential growth with jitter, so many clients that lost one server do not return in step.

export interface BackoffOptions {
  initialMs?: number;
  maxMs?: number;
  /** Fraction of the delay drawn at random, 0..1. */
  jitter?: number;
  random?: () => number;
}

export class Backoff {
  private attempt = 0;
  private readonly initialMs: number;
  private readonly maxMs: number;
  private readonly jitter: number;
  private readonly random: () => number;

  constructor(opts: BackoffOptions = {}) {
    this.initialMs = opts.initialMs ?? 200;
    this.maxMs = opts.maxMs ?? 8000;
    this.jitter = Math.min(1, Math.max(0, opts.jitter ?? 0.5));
    this.random = opts.random ?? Math.random;
  }

  /** The next delay in ms; grows until reset(). */
  next(): number {
    const base = Math.min(this.maxMs, this.initialMs * 2 ** this.attempt);
    this.attempt = Math.min(this.attempt + 1, 30);
    return Math.round(base * (1 - this.jitter * this.random()));
  }

  reset(): void {
    this.attempt = 0;
  }
}

/**
 * A promise that resolves after `ms`; rejects if `signal` aborts. With `ref: false` the timer does not keep the
 * process alive.
 */
export function sleep(ms: number, signal?: AbortSignal, ref = true): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    if (!ref) t.unref();
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
