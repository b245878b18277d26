// The Prometheus metrics of the controller and the node agent, in one Registry that /metrics serves. Metric
// names follow the Prometheus conventions (unit suffixes, _total counters) under the zstack_ovn_ prefix.

import { collectDefaultMetrics, Gauge, Registry } from "prom-client";
import { FastCounter, FastGauge, FastHistogram } from "./queue-series.ts";

export interface MetricsOptions {
  /** Process metrics (CPU, memory, event-loop lag, GC). Default true. */
  processMetrics?: boolean;
  /** Labels on every metric, e.g. { component: "controller" }. */
  defaultLabels?: Record<string, string>;
}

/** What a workqueue reports; structurally WorkQueueHooks from src/k8s/workqueue.ts. */
export interface QueueObserver {
  onAdd(key: string): void;
  onDepth(depth: number): void;
  onRetry(key: string, attempt: number, delayMs: number): void;
  onReconciled(key: string, durationMs: number, outcome: string, queuedMs: number): void;
}

const DURATION_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export class Metrics {
  readonly registry = new Registry();
  readonly reconcileTotal: FastCounter;
  readonly reconcileErrors: FastCounter;
  readonly reconcileDuration: FastHistogram;
  readonly queueDepth: FastGauge;
  readonly queueAdds: FastCounter;
  readonly queueRetries: FastCounter;
  readonly queueLatency: FastHistogram;
  readonly ipamAddresses: Gauge<"subnet" | "state">;
  readonly leader: Gauge;

  constructor(opts: MetricsOptions = {}) {
    if (opts.defaultLabels) this.registry.setDefaultLabels(opts.defaultLabels);
    if (opts.processMetrics ?? true)
      collectDefaultMetrics({ register: this.registry, prefix: "zstack_ovn_" });
    const registers = [this.registry];
    // The workqueue series, updated several times per key: see queue-series.ts.
    this.reconcileTotal = new FastCounter(
      "zstack_ovn_reconcile_total",
      "Reconciles run, by controller and result (success, requeue, error, terminal).",
      ["controller", "result"],
      registers,
    );
    this.reconcileErrors = new FastCounter(
      "zstack_ovn_reconcile_errors_total",
      "Reconciles that failed (retried or terminal), by controller.",
      ["controller"],
      registers,
    );
    this.reconcileDuration = new FastHistogram(
      "zstack_ovn_reconcile_duration_seconds",
      "Time one reconcile took, by controller.",
      ["controller"],
      DURATION_BUCKETS,
      registers,
    );
    this.queueDepth = new FastGauge(
      "zstack_ovn_workqueue_depth",
      "Keys waiting in a workqueue.",
      ["queue"],
      registers,
    );
    this.queueAdds = new FastCounter(
      "zstack_ovn_workqueue_adds_total",
      "Keys added to a workqueue, duplicates included.",
      ["queue"],
      registers,
    );
    this.queueRetries = new FastCounter(
      "zstack_ovn_workqueue_retries_total",
      "Keys requeued with backoff after a failed reconcile.",
      ["queue"],
      registers,
    );
    this.queueLatency = new FastHistogram(
      "zstack_ovn_workqueue_queue_duration_seconds",
      "Time a key waited in a workqueue before a worker took it.",
      ["queue"],
      DURATION_BUCKETS,
      registers,
    );
    this.ipamAddresses = new Gauge({
      name: "zstack_ovn_ipam_addresses",
      help: "Addresses of a subnet by state: used, available, excluded.",
      labelNames: ["subnet", "state"],
      registers,
    });
    this.leader = new Gauge({
      name: "zstack_ovn_leader",
      help: "1 while this process leads and its controller has finished its initial sync (it reconciles), else 0.",
      registers,
    });
  }

  /** Hooks for a WorkQueue named `queue`; the queue name doubles as the controller label. */
  queueHooks(queue: string): QueueObserver {
    // Called several times per key: each series is looked up once here, and per outcome on first use.
    const adds = this.queueAdds.child({ queue });
    const depth = this.queueDepth.child({ queue });
    const retries = this.queueRetries.child({ queue });
    const errors = this.reconcileErrors.child({ controller: queue });
    const duration = this.reconcileDuration.child({ controller: queue });
    const latency = this.queueLatency.child({ queue });
    const totals = new Map<string, { inc(): void }>();
    return {
      onAdd: () => adds.inc(),
      onDepth: (d) => depth.set(d),
      onRetry: () => retries.inc(),
      onReconciled: (_key, durationMs, outcome, queuedMs) => {
        let total = totals.get(outcome);
        if (!total) {
          total = this.reconcileTotal.child({ controller: queue, result: outcome });
          totals.set(outcome, total);
        }
        total.inc();
        if (outcome === "error" || outcome === "terminal") errors.inc();
        duration.observe(durationMs / 1000);
        latency.observe(queuedMs / 1000);
      },
    };
  }

  /** IPAM usage of one subnet. */
  setSubnetUsage(subnet: string, usage: { used: number; available: number; excluded?: number }): void {
    this.ipamAddresses.set({ subnet, state: "used" }, usage.used);
    this.ipamAddresses.set({ subnet, state: "available" }, usage.available);
    if (usage.excluded !== undefined) this.ipamAddresses.set({ subnet, state: "excluded" }, usage.excluded);
  }

  /** Drops a deleted subnet's series, so it does not linger with its last values. */
  deleteSubnet(subnet: string): void {
    for (const state of ["used", "available", "excluded"]) this.ipamAddresses.remove({ subnet, state });
  }

  /** The text exposition format for /metrics. */
  async expose(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
