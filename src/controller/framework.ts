// The shape every reconciler of zstack-ovnkube-controller shares: informer events (and NB cache events) only
// enqueue keys, one WorkQueue per reconciler feeds its workers, and reconcile(key) brings NB and the apiserver
// in line with the caches. The manager owns the informers and queues of one leadership term: it starts them
// once NB and the caches are ready, resyncs periodically, and stops everything when the term ends. A new kind
// is a new Reconciler registered with it.

import { setMaxListeners } from "node:events";
import type { Informer } from "../k8s/informer.ts";
import type { KubeObject } from "../k8s/object-key.ts";
import { type ReconcileResult, WorkQueue } from "../k8s/workqueue.ts";
import type { Logger } from "../observability/log.ts";
import type { Metrics } from "../observability/metrics.ts";

/** Undoes a registration (an informer handler, an NB cache subscription, a listener). */
export type Disposer = () => void;

export interface Reconciler {
  /** Names the reconciler's queue in logs, metrics and health checks. */
  readonly name: string;
  readonly workers: number;
  reconcile(key: string): Promise<ReconcileResult>;
  /**
   * Registers the handlers that enqueue this reconciler's keys (informers, NB cache); called once the informers
   * have synced and the startup steps are done, before any queue starts. Returns what undoes them.
   */
  watch(): Disposer[];
  /**
   * Run once at start after watch() and before the workers: writes many keys' state in a few transactions where
   * one transaction per key would be slow. What it leaves undone the per-key reconciles do. The reconcilers'
   * bulkSyncs are all called at once, in registration order; `previous` settles (never rejects) once those of
   * the reconcilers registered before have ended, so one whose writes must land after theirs can build them at
   * once and send them then. It says whether all of those landed: true only if each returned true.
   * A bulkSync returns false when some of its writes are not known to be in NB (a batch failed, or NB does not
   * show it), so one that builds on them holds back and leaves its keys to the queue.
   */
  bulkSync?(previous: Promise<boolean>): Promise<boolean>;
  /** Keys to reconcile once at start besides those the handlers enqueue (rows left in NB by objects now gone). */
  startupKeys?(): Iterable<string>;
  /** Keys enqueued again on each periodic resync, catching anything a watch missed. */
  resyncKeys?(): Iterable<string>;
}

export interface ManagerOptions {
  log: Logger;
  metrics?: Metrics;
  /** Every reconciler's resyncKeys() are enqueued this often. Default 5 min. */
  resyncMs?: number;
  /** How long a run waits for each waitFor step and for each informer's first list before it fails. */
  startWaitMs: number;
  /** Waited for (up to startWaitMs) before the informers start: NB being reachable, say. */
  waitFor?(timeoutMs: number): Promise<unknown>;
  /** Run once the informers have synced, before the reconcilers watch: topology every reconciler relies on. */
  prepare?(): Promise<void>;
}

/**
 * Runs the reconcilers of one term of leadership. Its `term` signal aborts when the run ends: whatever the
 * term writes through should be fenced on it, so that no reconcile still in flight writes once it is over.
 */
function unlimitedListeners(signal: AbortSignal): AbortSignal {
  setMaxListeners(0, signal);
  return signal;
}

export class ReconcilerManager {
  private readonly termController = new AbortController();
  /**
   * Ends with this manager's run (leadership lost, stop(), or a failed start). Every fenced NB subscription and
   * every reconciler listens on it, more than Node's default of 10 listeners, which is no leak: each removes
   * its listener when it ends.
   */
  readonly term: AbortSignal = unlimitedListeners(this.termController.signal);
  private readonly informers = new Map<string, Informer<KubeObject>>();
  private readonly reconcilers: { r: Reconciler; q: WorkQueue }[] = [];
  private readonly queues = new Map<string, WorkQueue>();
  private readonly disposers: Disposer[] = [];
  private resyncTimer: NodeJS.Timeout | undefined;
  private synced = false;

  constructor(private readonly opts: ManagerOptions) {}

  /** Adds an informer shared by the reconcilers: started, waited for and stopped with the run. */
  informer<T extends KubeObject>(name: string, inf: Informer<T>): Informer<T> {
    this.informers.set(name, inf as unknown as Informer<KubeObject>);
    return inf;
  }

  /** Adds a reconciler and creates its queue; keys may be enqueued at once, they run once the run has started. */
  register(r: Reconciler): void {
    if (this.queues.has(r.name)) throw new Error(`reconciler ${r.name} registered twice`);
    const q = new WorkQueue({
      name: r.name,
      reconcile: (k) => r.reconcile(k),
      workers: r.workers,
      logger: this.opts.log.child({ queue: r.name }),
      ...(this.opts.metrics ? { hooks: this.opts.metrics.queueHooks(r.name) } : {}),
    });
    this.reconcilers.push({ r, q });
    this.queues.set(r.name, q);
  }

  /** Queues a key of the named reconciler. */
  add(reconciler: string, key: string): void {
    this.queue(reconciler).add(key);
  }

  /** Queues a key of the named reconciler after a delay (a burst of changes becomes one reconcile). */
  addAfter(reconciler: string, key: string, delayMs: number): void {
    this.queue(reconciler).addAfter(key, delayMs);
  }

  private queue(name: string): WorkQueue {
    const q = this.queues.get(name);
    if (!q) throw new Error(`no reconciler ${name}`);
    return q;
  }

  /**
   * Runs until `signal` aborts: waits for NB and the informers, syncs everything once (then calls onSynced),
   * then follows events.
   * Rejects when starting fails, resolves when the run was ended (`signal` or stop()). Either way everything
   * it started is stopped before it settles, and the manager cannot run again: a new run (a new term of
   * leadership) needs a new manager.
   */
  async run(signal: AbortSignal, onSynced?: () => void): Promise<void> {
    const endTerm = () => this.termController.abort(signal.reason);
    if (signal.aborted) endTerm();
    signal.addEventListener("abort", endTerm, { once: true });
    const term = this.term;
    try {
      if (!term.aborted) await this.start();
      // The term may have ended while the last steps of starting ran.
      if (!term.aborted) {
        this.synced = true;
        const sizes = Object.fromEntries([...this.informers].map(([name, inf]) => [name, inf.size]));
        this.opts.log.info(sizes, "controller running");
        onSynced?.();
        await new Promise<void>((resolve) => term.addEventListener("abort", () => resolve(), { once: true }));
      }
    } catch (err) {
      // Starting cut short by the end of the term (a refused write, a stopped informer) is no failure.
      if (!term.aborted) throw err;
    } finally {
      signal.removeEventListener("abort", endTerm);
      await this.stop();
    }
  }

  /** True from the end of the initial sync until the run ends. */
  isSynced(): boolean {
    return this.synced;
  }

  /** Reconciles that have run for more than maxMs ("queue key" each): wedged workers, for liveness. */
  stalledReconciles(maxMs: number, now = Date.now()): string[] {
    return this.reconcilers.flatMap(({ r, q }) =>
      q.stalled(maxMs, now).map((s) => `${r.name} ${s.key} (${Math.round(s.runningMs / 1000)} s)`),
    );
  }

  /** Settles like `p`, or rejects as soon as the run ends, so that stopping never waits for a slow start. */
  private unlessStopped<T>(p: Promise<T>): Promise<T> {
    const term = this.term;
    if (term.aborted) return Promise.reject(term.reason);
    return new Promise<T>((resolve, reject) => {
      const onEnd = () => reject(term.reason);
      term.addEventListener("abort", onEnd, { once: true });
      p.then(resolve, reject).finally(() => term.removeEventListener("abort", onEnd));
    });
  }

  private async start(): Promise<void> {
    const wait = this.opts.startWaitMs;
    if (this.opts.waitFor) await this.unlessStopped(this.opts.waitFor(wait));
    for (const inf of this.informers.values()) inf.start();
    await this.unlessStopped(Promise.all([...this.informers.values()].map((inf) => inf.waitForSync(wait))));
    await this.opts.prepare?.();
    for (const { r } of this.reconcilers) this.disposers.push(...r.watch());
    for (const { r, q } of this.reconcilers) for (const k of r.startupKeys?.() ?? []) q.add(k);
    const bulk: Promise<boolean>[] = [];
    let previous = Promise.resolve(true);
    for (const { r } of this.reconcilers) {
      if (!r.bulkSync) continue;
      const p = r.bulkSync(previous);
      bulk.push(p);
      const landed = p.catch(() => false);
      previous = Promise.all([previous, landed]).then(([a, b]) => a && b);
    }
    await this.unlessStopped(Promise.all(bulk));
    for (const { q } of this.reconcilers) q.start();
    this.resyncTimer = setInterval(() => {
      for (const { r, q } of this.reconcilers) for (const k of r.resyncKeys?.() ?? []) q.add(k);
    }, this.opts.resyncMs ?? 300_000);
    this.resyncTimer.unref();
  }

  /** Ends the run: no fenced write passes from now on, and what the run started is stopped. */
  async stop(): Promise<void> {
    this.termController.abort(new Error("controller stopped"));
    this.synced = false;
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    await Promise.all(this.reconcilers.map(({ q }) => q.shutdown({ timeoutMs: 5000 })));
    await Promise.all([...this.informers.values()].map((inf) => inf.stop()));
    for (const d of this.disposers.splice(0)) d();
  }
}
