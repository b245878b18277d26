// Counters, gauges and histograms with one label, for the workqueue metrics: each queue updates them several
// times per key, and prom-client's own metrics validate and hash their labels on every update. Here a queue's
// series is found once (child()) and an update is a field increment; the registry reads the values when it is
// scraped, in prom-client's format (they register like any prom-client metric).

import type { Registry } from "prom-client";

type Labels = Record<string, string | number>;

interface ExportedValue {
  labels: Labels;
  /** Printed after `labels`, as prom-client prints a bucket's series labels after its `le`. */
  sharedLabels?: Labels;
  value: number;
  metricName?: string;
}

interface Exported {
  name: string;
  help: string;
  type: "counter" | "gauge" | "histogram";
  values: ExportedValue[];
  aggregator: "sum";
}

abstract class Series<S> {
  readonly aggregator = "sum";
  protected readonly series = new Map<string, { labels: Labels; s: S }>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
    registers: readonly Registry[],
  ) {
    // The registry stores and reads any object with name, help, type and get(): prom-client's own shape.
    for (const r of registers) r.registerMetric(this as never);
  }

  protected abstract fresh(): S;

  /** The series of these label values, made on first use. */
  protected seriesOf(labels: Labels): S {
    const key = this.labelNames.map((n) => String(labels[n] ?? "")).join("\0");
    let entry = this.series.get(key);
    if (!entry) {
      entry = { labels: { ...labels }, s: this.fresh() };
      this.series.set(key, entry);
    }
    return entry.s;
  }

  /**
   * Zeroes every series in place: queues hold their series' objects (child()), so dropping them would leave
   * those queues counting into series the registry no longer prints.
   */
  reset(): void {
    for (const entry of this.series.values()) Object.assign(entry.s as object, this.fresh());
  }
}

/** A series holding one number per label set: counters and gauges. */
abstract class ValueSeries extends Series<{ value: number }> {
  abstract readonly type: "counter" | "gauge";

  protected fresh(): { value: number } {
    return { value: 0 };
  }

  get(): Exported {
    return {
      name: this.name,
      help: this.help,
      type: this.type,
      aggregator: this.aggregator,
      values: [...this.series.values()].map(({ labels, s }) => ({ labels, value: s.value })),
    };
  }
}

export class FastCounter extends ValueSeries {
  readonly type = "counter";

  child(labels: Labels): { inc(): void } {
    const s = this.seriesOf(labels);
    return {
      inc: () => {
        s.value++;
      },
    };
  }
}

export class FastGauge extends ValueSeries {
  readonly type = "gauge";

  child(labels: Labels): { set(v: number): void } {
    const s = this.seriesOf(labels);
    return {
      set: (v: number) => {
        s.value = v;
      },
    };
  }
}

interface HistogramSeries {
  /** Observations per bucket (not cumulative); the last slot counts those above every bound. */
  counts: number[];
  sum: number;
  count: number;
}

export class FastHistogram extends Series<HistogramSeries> {
  readonly type = "histogram";
  private readonly bounds: readonly number[];

  constructor(
    name: string,
    help: string,
    labelNames: readonly string[],
    buckets: readonly number[],
    registers: readonly Registry[],
  ) {
    super(name, help, labelNames, registers);
    this.bounds = [...buckets].sort((a, b) => a - b);
  }

  protected fresh(): HistogramSeries {
    return { counts: new Array<number>(this.bounds.length + 1).fill(0), sum: 0, count: 0 };
  }

  child(labels: Labels): { observe(v: number): void } {
    const s = this.seriesOf(labels);
    const bounds = this.bounds;
    return {
      observe: (v: number) => {
        if (!Number.isFinite(v)) return;
        let i = 0;
        while (i < bounds.length && v > (bounds[i] as number)) i++;
        s.counts[i] = (s.counts[i] as number) + 1;
        s.sum += v;
        s.count++;
      },
    };
  }

  get(): Exported {
    const values: ExportedValue[] = [];
    for (const { labels, s } of this.series.values()) {
      let acc = 0;
      this.bounds.forEach((le, i) => {
        acc += s.counts[i] as number;
        values.push({ labels: { le }, sharedLabels: labels, value: acc, metricName: `${this.name}_bucket` });
      });
      const inf = { labels: { le: "+Inf" }, sharedLabels: labels, value: s.count };
      values.push({ ...inf, metricName: `${this.name}_bucket` });
      values.push({ labels, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels, value: s.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }
}
