import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { FastCounter, FastGauge, FastHistogram } from "./queue-series.ts";

const BUCKETS = [0.001, 0.01, 0.1, 1, 10];

describe("queue series", () => {
  it("export what prom-client's own counter, gauge and histogram export for the same updates", async () => {
    const label = fc.constantFrom("pods", "pod-annotations", "subnets");
    const update = fc.oneof(
      fc.record({ kind: fc.constant("inc" as const), label }),
      fc.record({ kind: fc.constant("set" as const), label, v: fc.integer({ min: 0, max: 1000 }) }),
      fc.record({
        kind: fc.constant("observe" as const),
        label,
        // Bounds themselves included: a value equal to a bound falls in that bound's bucket.
        v: fc.oneof(fc.double({ min: 0, max: 100, noNaN: true }), fc.constantFrom(...BUCKETS)),
      }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(update, { maxLength: 60 }), async (updates) => {
        const ours = new Registry();
        const theirs = new Registry();
        const c = new FastCounter("c_total", "c", ["queue"], [ours]);
        const g = new FastGauge("g", "g", ["queue"], [ours]);
        const h = new FastHistogram("h_seconds", "h", ["queue"], BUCKETS, [ours]);
        const pc = new Counter({ name: "c_total", help: "c", labelNames: ["queue"], registers: [theirs] });
        const pg = new Gauge({ name: "g", help: "g", labelNames: ["queue"], registers: [theirs] });
        const ph = new Histogram({
          name: "h_seconds",
          help: "h",
          labelNames: ["queue"],
          buckets: BUCKETS,
          registers: [theirs],
        });
        for (const u of updates) {
          const queue = u.label;
          if (u.kind === "inc") {
            c.child({ queue }).inc();
            pc.inc({ queue });
          } else if (u.kind === "set") {
            g.child({ queue }).set(u.v);
            pg.set({ queue }, u.v);
          } else {
            h.child({ queue }).observe(u.v);
            ph.observe({ queue }, u.v);
          }
        }
        assert.equal(await ours.metrics(), await theirs.metrics());
      }),
      { numRuns: 200 },
    );
  });

  it("a child found once keeps counting into the series the registry reads", async () => {
    const r = new Registry();
    const c = new FastCounter("adds_total", "adds", ["queue"], [r]);
    const adds = c.child({ queue: "pods" });
    for (let i = 0; i < 3; i++) adds.inc();
    c.child({ queue: "pods" }).inc();
    assert.match(await r.metrics(), /adds_total\{queue="pods"\} 4/);
  });

  it("a child found before the registry is reset counts into the zeroed series afterwards", async () => {
    const r = new Registry();
    const c = new FastCounter("adds_total", "adds", ["queue"], [r]);
    const g = new FastGauge("depth", "depth", ["queue"], [r]);
    const h = new FastHistogram("latency_seconds", "latency", ["queue"], [0.1, 1], [r]);
    const adds = c.child({ queue: "pods" });
    const depth = g.child({ queue: "pods" });
    const latency = h.child({ queue: "pods" });
    adds.inc();
    depth.set(5);
    latency.observe(0.5);
    r.resetMetrics();
    const zeroed = await r.metrics();
    assert.match(zeroed, /adds_total\{queue="pods"\} 0/);
    assert.match(zeroed, /latency_seconds_count\{queue="pods"\} 0/);
    adds.inc();
    adds.inc();
    depth.set(2);
    latency.observe(0.05);
    const text = await r.metrics();
    assert.match(text, /adds_total\{queue="pods"\} 2/);
    assert.match(text, /depth\{queue="pods"\} 2/);
    assert.match(text, /latency_seconds_bucket\{le="0.1",queue="pods"\} 1/);
    assert.match(text, /latency_seconds_count\{queue="pods"\} 1/);
  });
});
