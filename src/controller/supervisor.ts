// Runs the controller in terms: with leader election one term per leadership, without it one term after
// another for as long as the process lives. Each term gets a fresh OvnController (fresh informers, fresh
// queues, a fresh NB write fence), so nothing of a failed or deposed term leaks into the next: a term that
// fails to start, or loses the Lease, stops writing at once, and the process campaigns again (leader
// election) or starts over after a backoff (no leader election). The process is never left leading without
// reconciling: leading() is true only once the term's controller finished its initial sync.

import { type LeaderElectionOptions, LeaderElector } from "../k8s/leader-election.ts";
import type { Logger } from "../observability/log.ts";
import type { Metrics } from "../observability/metrics.ts";

/** What the supervisor runs each term; OvnController satisfies it. */
export interface TermController {
  /** Runs until `signal` aborts; calls onSynced once the initial sync is done. */
  run(signal: AbortSignal, onSynced?: () => void): Promise<void>;
  isSynced(): boolean;
  /** Reconciles running longer than maxMs, described for a health check. */
  stalledReconciles?(maxMs: number): string[];
}

export interface SupervisorHooks {
  /** A term began (leadership acquired, or, without leader election, a new start). */
  onTermStarted?(term: number): void;
  /** The term's controller finished its initial sync. */
  onSynced?(term: number): void;
  /**
   * The term is ending (leadership lost or given up): called synchronously as it ends, before any further
   * NB write of the term could be sent; from here on the term's writes are refused.
   */
  onTermEnding?(term: number): void;
  /** The term is over and its controller stopped; `error` when it failed rather than being ended. */
  onTermEnded?(term: number, error?: unknown): void;
}

export interface SupervisorOptions {
  /** Builds the controller of one term; called once per term. */
  newController(): TermController;
  /** Leader election settings, or undefined to run without it (a single replica). */
  election?: Omit<LeaderElectionOptions, "onStartedLeading" | "onStoppedLeading" | "onNewLeader" | "logger">;
  /** Without leader election: pause before starting again after a failed term. Default 2 s, doubling to 1 min. */
  restartBackoffMs?: number;
  metrics?: Metrics;
  log: Logger;
  hooks?: SupervisorHooks;
}

export interface SupervisorStatus {
  /** This process holds the Lease (always true without leader election while a term runs). */
  holdsLease: boolean;
  /** The current term's controller finished its initial sync: this process reconciles. */
  synced: boolean;
  /** The Lease holder last seen ("" unknown or free; this process's identity when it leads). */
  leader: string;
  /** Why the last term failed, if it did. */
  lastFailure?: string;
}

export class ControllerSupervisor {
  private readonly elector: LeaderElector | undefined;
  private current: { term: number; ctl: TermController } | undefined;
  private terms = 0;
  private lastFailure: string | undefined;
  private readonly stopping = new AbortController();
  private loop: Promise<void> | undefined;

  constructor(private readonly opts: SupervisorOptions) {
    if (opts.election) {
      this.elector = new LeaderElector({
        ...opts.election,
        onStartedLeading: (signal) => this.runTerm(signal),
        onStoppedLeading: () => opts.log.warn({}, "no longer leading; not writing"),
        onNewLeader: (id) => opts.log.info({ leader: id }, "leader"),
        logger: opts.log,
      });
    }
  }

  start(): void {
    if (this.elector) this.elector.start();
    else this.loop ??= this.runUnelected();
  }

  /** Ends the current term and, with leader election, releases the Lease so a standby takes over at once. */
  async stop(): Promise<void> {
    this.stopping.abort(new Error("shutting down"));
    await this.elector?.stop({ release: true });
    await this.loop;
  }

  /** Leading and synced: this process is the one reconciling the cluster. */
  leading(): boolean {
    return this.status().synced;
  }

  /** The current term's reconciles that have run longer than maxMs (none between terms). */
  stalledReconciles(maxMs: number): string[] {
    return this.current?.ctl.stalledReconciles?.(maxMs) ?? [];
  }

  status(): SupervisorStatus {
    const synced = this.current?.ctl.isSynced() ?? false;
    const holdsLease = this.elector ? this.elector.isLeader() : this.current !== undefined;
    return {
      holdsLease,
      synced: holdsLease && synced,
      leader: this.elector ? this.elector.leader : holdsLease ? "self" : "",
      ...(this.lastFailure ? { lastFailure: this.lastFailure } : {}),
    };
  }

  /** One term: a fresh controller until `signal` aborts; rejects when the controller fails. */
  private async runTerm(signal: AbortSignal): Promise<void> {
    const term = ++this.terms;
    const ctl = this.opts.newController();
    this.current = { term, ctl };
    this.opts.hooks?.onTermStarted?.(term);
    const { metrics, log } = this.opts;
    // The gauge means "leading and synced", so a term that never finishes starting never shows as leader.
    const synced = () => {
      if (signal.aborted) return;
      metrics?.leader.set(1);
      this.opts.hooks?.onSynced?.(term);
    };
    const ending = () => this.opts.hooks?.onTermEnding?.(term);
    signal.addEventListener("abort", ending, { once: true });
    let failure: unknown;
    try {
      await ctl.run(signal, synced);
      if (!signal.aborted) throw new Error("the controller stopped by itself");
    } catch (err) {
      if (!signal.aborted) {
        failure = err;
        this.lastFailure = err instanceof Error ? err.message : String(err);
        log.error({ err, term }, "the controller failed; ending this term");
      }
    } finally {
      signal.removeEventListener("abort", ending);
      metrics?.leader.set(0);
      if (this.current?.term === term) this.current = undefined;
    }
    this.opts.hooks?.onTermEnded?.(term, failure);
    if (failure !== undefined) throw failure;
  }

  private async runUnelected(): Promise<void> {
    const base = this.opts.restartBackoffMs ?? 2000;
    let failures = 0;
    while (!this.stopping.signal.aborted) {
      try {
        await this.runTerm(this.stopping.signal);
        failures = 0;
      } catch {
        failures++;
        const wait = Math.min(base * 2 ** (failures - 1), 60_000);
        this.opts.log.info({ backoffMs: wait }, "starting the controller again after a backoff");
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, wait);
          this.stopping.signal.addEventListener(
            "abort",
            () => {
              clearTimeout(timer);
              resolve();
            },
            { once: true },
          );
        });
      }
    }
  }
}
