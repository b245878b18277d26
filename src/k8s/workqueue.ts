// The queue between informers and reconcilers, with client-go's semantics: a key is queued at most once
// (dirty set); a key being reconciled is never handed to a second worker, and if it is added meanwhile it
// runs again once the current run ends (processing set). Failures come back after a per-key exponential
// backoff; a TerminalError is not retried. N workers run reconcile(key) until shutdown.

import { type Logger, silentLogger } from "../observability/log.ts";

/**
 * What reconcile returns: nothing (done, the key's backoff is reset), or a request to run again after a
 * delay (periodic re-checks; not an error, so no backoff growth). Throwing means "retry with backoff".
 */
export type ReconcileResult = { requeueAfterMs: number } | undefined;

/** A failure that retrying cannot fix (an invalid spec, say): logged and counted, the key is dropped. */
export class TerminalError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "TerminalError";
  }
}

export type ReconcileOutcome = "success" | "requeue" | "error" | "terminal";

/** Observation points for metrics; Metrics.queueHooks() provides an implementation. */
export interface WorkQueueHooks {
  onAdd?(key: string): void;
  onDepth?(depth: number): void;
  onRetry?(key: string, attempt: number, delayMs: number): void;
  onReconciled?(key: string, durationMs: number, outcome: ReconcileOutcome, queuedMs: number): void;
}

export interface WorkQueueOptions {
  /** Names the queue in logs and metrics. */
  name: string;
  /** `signal` aborts when shutdown's timeout passes; long operations should give up then. */
  // biome-ignore lint/suspicious/noConfusingVoidType: a reconciler that returns nothing is done, and TypeScript only accepts such functions where the return type includes void
  reconcile: (key: string, signal: AbortSignal) => Promise<ReconcileResult | void> | ReconcileResult | void;
  workers?: number;
  /** First retry delay; doubles per consecutive failure of a key. Default 5 ms. */
  baseDelayMs?: number;
  /** Retry delay ceiling. Default 5 min. */
  maxDelayMs?: number;
  hooks?: WorkQueueHooks;
  logger?: Logger;
}

export interface ShutdownOptions {
  /** Also reconcile keys already queued (not delayed ones) before stopping. Default false. */
  drain?: boolean;
  /** After this long, in-flight reconciles are signalled to abort; shutdown still waits for them. */
  timeoutMs?: number;
}

export class WorkQueue {
  private readonly queue: string[] = [];
  private head = 0;
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  /** When each key being reconciled started, to tell a wedged worker from a busy one. */
  private readonly startedAt = new Map<string, number>();
  /** When each dirty key was queued, for the time-in-queue observation. */
  private readonly queuedAt = new Map<string, number>();
  private readonly failures = new Map<string, number>();
  private readonly delayed = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly idleWorkers: Array<(key: string | undefined) => void> = [];
  private workers: Promise<void>[] = [];
  private shuttingDown = false;
  private draining = false;
  private readonly abort = new AbortController();
  private readonly log: Logger;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;

  constructor(private readonly opts: WorkQueueOptions) {
    this.log = (opts.logger ?? silentLogger).child({ queue: opts.name });
    this.baseDelayMs = opts.baseDelayMs ?? 5;
    this.maxDelayMs = opts.maxDelayMs ?? 300_000;
  }

  /** Queues key unless it is already queued; a key being reconciled runs again after the current run. */
  add(key: string): void {
    if (this.shuttingDown) return;
    this.opts.hooks?.onAdd?.(key);
    if (this.dirty.has(key)) return;
    this.dirty.add(key);
    this.queuedAt.set(key, Date.now());
    if (this.processing.has(key)) return;
    this.push(key);
  }

  /** Queues key after delayMs; of several pending delays for one key, the earliest wins. */
  addAfter(key: string, delayMs: number): void {
    if (this.shuttingDown) return;
    if (delayMs <= 0) {
      this.add(key);
      return;
    }
    const at = Date.now() + delayMs;
    const pending = this.delayed.get(key);
    if (pending && pending.at <= at) return;
    if (pending) clearTimeout(pending.timer);
    const timer = setTimeout(() => {
      this.delayed.delete(key);
      this.add(key);
    }, delayMs);
    this.delayed.set(key, { at, timer });
  }

  /** Queues key after its backoff delay, which doubles with each call until forget(key). */
  addRateLimited(key: string): number {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    const delay = Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** Math.min(n, 40));
    this.opts.hooks?.onRetry?.(key, n + 1, delay);
    this.addAfter(key, delay);
    return delay;
  }

  /** Resets key's backoff. */
  forget(key: string): void {
    this.failures.delete(key);
  }

  /** Consecutive failures of key since the last forget. */
  numRequeues(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  /** Keys waiting to be reconciled (delayed ones not included). */
  get depth(): number {
    return this.queue.length - this.head;
  }

  /** Keys waiting for a delay (backoff or requeueAfter) to pass. */
  get delayedCount(): number {
    return this.delayed.size;
  }

  get inFlight(): number {
    return this.processing.size;
  }

  /**
   * Keys whose reconcile has been running for more than maxMs at `now`, oldest first: a worker held that
   * long is wedged (a reconcile awaiting something that never settles), which liveness reports.
   */
  stalled(maxMs: number, now = Date.now()): { key: string; runningMs: number }[] {
    const out: { key: string; runningMs: number }[] = [];
    for (const [key, at] of this.startedAt) if (now - at > maxMs) out.push({ key, runningMs: now - at });
    return out.sort((a, b) => b.runningMs - a.runningMs);
  }

  isShuttingDown(): boolean {
    return this.shuttingDown;
  }

  /** Starts the workers; idempotent. */
  start(): void {
    if (this.workers.length > 0 || this.shuttingDown) return;
    const n = Math.max(1, this.opts.workers ?? 1);
    for (let i = 0; i < n; i++) this.workers.push(this.work());
  }

  /**
   * Stops taking keys and waits until no reconcile runs. Queued keys are dropped unless drain is set;
   * delayed keys are always dropped (whoever runs next lists everything again).
   */
  async shutdown(opts: ShutdownOptions = {}): Promise<void> {
    if (!this.shuttingDown) {
      this.shuttingDown = true;
      this.draining = opts.drain ?? false;
      for (const { timer } of this.delayed.values()) clearTimeout(timer);
      this.delayed.clear();
      if (!this.draining) this.dropQueued();
      this.wakeIdle();
    }
    const timer =
      opts.timeoutMs === undefined
        ? undefined
        : setTimeout(
            () => this.abort.abort(new Error(`queue ${this.opts.name} shutdown timed out`)),
            opts.timeoutMs,
          );
    try {
      await Promise.all(this.workers);
    } finally {
      clearTimeout(timer);
    }
  }

  private push(key: string): void {
    const waiter = this.idleWorkers.shift();
    if (waiter) {
      this.take(key);
      waiter(key);
    } else {
      this.queue.push(key);
      this.opts.hooks?.onDepth?.(this.depth);
    }
  }

  private take(key: string): void {
    this.dirty.delete(key);
    this.processing.add(key);
  }

  private next(): Promise<string | undefined> {
    if (this.head < this.queue.length) {
      const key = this.queue[this.head] as string;
      this.head++;
      // Compact now and then, so a long-lived queue does not keep every key it ever held.
      if (this.head > 1024 && this.head * 2 > this.queue.length) {
        this.queue.splice(0, this.head);
        this.head = 0;
      }
      this.take(key);
      this.opts.hooks?.onDepth?.(this.depth);
      return Promise.resolve(key);
    }
    if (this.shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.idleWorkers.push(resolve));
  }

  private dropQueued(): void {
    for (let i = this.head; i < this.queue.length; i++) {
      const key = this.queue[i] as string;
      this.dirty.delete(key);
      this.queuedAt.delete(key);
    }
    this.queue.length = 0;
    this.head = 0;
    this.opts.hooks?.onDepth?.(0);
  }

  private wakeIdle(): void {
    for (const w of this.idleWorkers.splice(0)) w(undefined);
  }

  private async work(): Promise<void> {
    for (;;) {
      const key = await this.next();
      if (key === undefined) return;
      await this.process(key);
    }
  }

  private async process(key: string): Promise<void> {
    const start = Date.now();
    this.startedAt.set(key, start);
    const queuedMs = start - (this.queuedAt.get(key) ?? start);
    this.queuedAt.delete(key);
    let outcome: ReconcileOutcome;
    try {
      const result = await this.opts.reconcile(key, this.abort.signal);
      this.forget(key);
      if (result && result.requeueAfterMs >= 0) {
        outcome = "requeue";
        this.addAfter(key, result.requeueAfterMs);
      } else {
        outcome = "success";
      }
    } catch (err) {
      if (err instanceof TerminalError) {
        outcome = "terminal";
        this.forget(key);
        this.log.error({ key, err }, "reconcile failed permanently; not retrying");
      } else {
        outcome = "error";
        if (!this.shuttingDown) {
          const delay = this.addRateLimited(key);
          this.log.warn({ key, err, retryInMs: delay, attempt: this.numRequeues(key) }, "reconcile failed");
        }
      }
    }
    this.opts.hooks?.onReconciled?.(key, Date.now() - start, outcome, queuedMs);
    this.startedAt.delete(key);
    this.processing.delete(key);
    // Added while it ran: it goes back in line now that no worker holds it.
    if (this.dirty.has(key)) {
      if (this.shuttingDown && !this.draining) {
        this.dirty.delete(key);
      } else {
        this.push(key);
      }
    }
  }
}
