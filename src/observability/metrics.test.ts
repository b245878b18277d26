import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { TerminalError, WorkQueue } from "../k8s/workqueue.ts";
import { Metrics } from "./metrics.ts";

async function value(m: Metrics, name: string, labels: Record<string, string>): Promise<number | undefined> {
  const metric = (await m.registry.getMetricsAsJSON()).find((x) => x.name === name);
  const v = (
    metric?.values as Array<{ labels: Record<string, unknown>; value: number; metricName?: string }>
  )?.find(
    (s) => (s.metricName ?? name) === name && Object.entries(labels).every(([k, l]) => s.labels[k] === l),
  );
  return v?.value;
}

describe("Metrics", () => {
  it("counts a workqueue's reconciles by result, its retries and adds, and times them", async () => {
    const m = new Metrics({ processMetrics: false });
    let n = 0;
    const q = new WorkQueue({
      name: "pods",
      baseDelayMs: 1,
      hooks: m.queueHooks("pods"),
      reconcile: (key) => {
        if (key === "bad") throw new TerminalError("invalid");
        if (key === "flaky" && n++ === 0) throw new Error("once");
      },
    });
    q.start();
    q.add("ok");
    q.add("flaky");
    q.add("bad");
    while ((await value(m, "zstack_ovn_reconcile_total", { controller: "pods", result: "success" })) !== 2)
      await new Promise((r) => setTimeout(r, 5));
    await q.shutdown();
    assert.equal(await value(m, "zstack_ovn_reconcile_total", { result: "error" }), 1);
    assert.equal(await value(m, "zstack_ovn_reconcile_total", { result: "terminal" }), 1);
    assert.equal(await value(m, "zstack_ovn_reconcile_errors_total", { controller: "pods" }), 2);
    assert.equal(await value(m, "zstack_ovn_workqueue_retries_total", { queue: "pods" }), 1);
    assert.equal(await value(m, "zstack_ovn_workqueue_adds_total", { queue: "pods" }), 4);
    const text = await m.registry.metrics();
    assert.match(text, /zstack_ovn_reconcile_duration_seconds_count\{controller="pods"\} 4/);
  });

  it("exports IPAM usage per subnet and forgets a deleted subnet", async () => {
    const m = new Metrics({ processMetrics: false });
    m.setSubnetUsage("a", { used: 10, available: 244, excluded: 2 });
    m.setSubnetUsage("b", { used: 1, available: 1 });
    assert.equal(await value(m, "zstack_ovn_ipam_addresses", { subnet: "a", state: "excluded" }), 2);
    m.deleteSubnet("a");
    const text = await m.registry.metrics();
    assert.doesNotMatch(text, /subnet="a"/);
    assert.match(text, /zstack_ovn_ipam_addresses\{subnet="b",state="available"\} 1/);
  });

  it("includes process metrics and default labels when asked", async () => {
    const m = new Metrics({ defaultLabels: { component: "controller" } });
    const text = await m.registry.metrics();
    assert.match(text, /zstack_ovn_process_resident_memory_bytes\{component="controller"\}/);
  });
});
