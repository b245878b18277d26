// Where the controller's time goes during part B of make bench-services: its own Prometheus metrics, read before
// and after the churn, as differences: reconciles run, time in the work queue and in reconcile (from histogram
// buckets), and garbage-collection pauses by kind.

/** Every sample of a Prometheus text exposition, by series name with labels as written. */
export type Samples = Map<string, number>;

export async function scrape(port: number): Promise<Samples> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  const text = await res.text();
  const out: Samples = new Map();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const cut = line.lastIndexOf(" ");
    const value = Number(line.slice(cut + 1));
    if (Number.isFinite(value)) out.set(line.slice(0, cut), value);
  }
  return out;
}

/** The series of `name` whose labels include `labels` (the controller adds default labels of its own). */
function seriesKey(s: Samples, name: string, labels: string): string | undefined {
  for (const key of s.keys()) if (key.startsWith(`${name}{`) && key.includes(labels)) return key;
  return undefined;
}

function delta(a: Samples, b: Samples, name: string, labels: string): number {
  const key = seriesKey(b, name, labels);
  return key === undefined ? 0 : (b.get(key) ?? 0) - (a.get(key) ?? 0);
}

/** Count, mean and the bucket bound holding the q-quantile of a histogram's observations between two scrapes. */
function histogram(a: Samples, b: Samples, name: string, labels: string) {
  const count = delta(a, b, `${name}_count`, labels);
  const sum = delta(a, b, `${name}_sum`, labels);
  const buckets: [number, number][] = [];
  for (const key of b.keys()) {
    if (!key.startsWith(`${name}_bucket{`) || !key.includes(labels)) continue;
    const le = /le="([^"]+)"/.exec(key)?.[1];
    if (le !== undefined)
      buckets.push([
        le === "+Inf" ? Number.POSITIVE_INFINITY : Number(le),
        (b.get(key) ?? 0) - (a.get(key) ?? 0),
      ]);
  }
  buckets.sort((x, y) => x[0] - y[0]);
  const bound = (q: number) => buckets.find(([, n]) => n >= q * count)?.[0] ?? Number.NaN;
  const above = (s: number) => count - (buckets.find(([le]) => le === s)?.[1] ?? count);
  return { count, meanMs: count ? (sum / count) * 1000 : Number.NaN, p99BoundMs: bound(0.99) * 1000, above };
}

export function churnBreakdown(before: Samples, after: Samples, queue: string): string[] {
  const reconciles = histogram(
    before,
    after,
    "zstack_ovn_reconcile_duration_seconds",
    `controller="${queue}"`,
  );
  const waits = histogram(before, after, "zstack_ovn_workqueue_queue_duration_seconds", `queue="${queue}"`);
  const adds = delta(before, after, "zstack_ovn_workqueue_adds_total", `queue="${queue}"`);
  const lines = [
    `B.   controller, during the churn: ${adds} queue adds, ${reconciles.count} reconciles; reconcile mean ${reconciles.meanMs.toFixed(2)} ms, p99 <= ${reconciles.p99BoundMs} ms; over 5 / 10 / 25 ms: ${reconciles.above(0.005)} / ${reconciles.above(0.01)} / ${reconciles.above(0.025)}`,
    `B.   controller, during the churn: time in queue mean ${waits.meanMs.toFixed(2)} ms, p99 <= ${waits.p99BoundMs} ms; over 5 / 10 / 25 ms: ${waits.above(0.005)} / ${waits.above(0.01)} / ${waits.above(0.025)}`,
  ];
  const gc: string[] = [];
  for (const kind of ["minor", "major", "incremental", "weakcb"]) {
    const h = histogram(before, after, "zstack_ovn_nodejs_gc_duration_seconds", `kind="${kind}"`);
    if (h.count > 0)
      gc.push(
        `${kind} ${h.count}× mean ${h.meanMs.toFixed(1)} ms (${h.above(0.01)} over 10 ms, ${h.above(0.1)} over 100 ms)`,
      );
  }
  lines.push(`B.   controller GC during the churn: ${gc.join("; ") || "none"}`);
  // prom-client resets its event-loop delay histogram at each scrape: `after` covers the churn alone.
  const lag = (name: string) => {
    const key = [...after.keys()].find((k) => k === name || k.startsWith(`${name}{`));
    return key === undefined ? Number.NaN : (after.get(key) as number) * 1000;
  };
  lines.push(
    `B.   controller event-loop delay during the churn: p50 ${lag("zstack_ovn_nodejs_eventloop_lag_p50_seconds").toFixed(1)} / p99 ${lag("zstack_ovn_nodejs_eventloop_lag_p99_seconds").toFixed(1)} / max ${lag("zstack_ovn_nodejs_eventloop_lag_max_seconds").toFixed(1)} ms`,
  );
  return lines;
}
