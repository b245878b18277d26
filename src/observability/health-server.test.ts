import assert from "node:assert/strict";
import { request } from "node:http";
import { describe, it } from "node:test";
import { HealthServer } from "./health-server.ts";
import { Metrics } from "./metrics.ts";

function get(port: number, path: string): Promise<{ status: number; type: string; body: string }> {
  return new Promise((resolve, reject) => {
    request({ host: "127.0.0.1", port, path }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => {
        body += d;
      });
      res.on("end", () =>
        resolve({ status: res.statusCode ?? 0, type: String(res.headers["content-type"]), body }),
      );
    })
      .on("error", reject)
      .end();
  });
}

describe("HealthServer", () => {
  it("answers ok on /healthz and /readyz while every check passes", async (t) => {
    const hs = new HealthServer({ port: 0, host: "127.0.0.1" });
    hs.addLivenessCheck("loop", () => true);
    hs.addReadinessCheck("informers", () => undefined);
    const port = await hs.start();
    t.after(() => hs.stop());
    assert.deepEqual(await get(port, "/healthz"), {
      status: 200,
      type: "text/plain; charset=utf-8",
      body: "ok\n",
    });
    assert.equal((await get(port, "/readyz")).body, "ok\n");
    assert.equal((await get(port, "/readyz?verbose")).body, "[+]informers ok\nreadyz check passed\n");
  });

  it("fails /readyz with 500 naming the failing check and its reason, and recovers when it passes", async (t) => {
    let synced = false;
    const hs = new HealthServer({ port: 0, host: "127.0.0.1", checkTimeoutMs: 100 });
    hs.addReadinessCheck("informers", () => (synced ? true : "pods not synced"));
    hs.addReadinessCheck("ovn-nb", async () => {
      throw new Error("connection refused");
    });
    hs.addReadinessCheck("slow", () => new Promise<boolean>(() => {}));
    const port = await hs.start();
    t.after(() => hs.stop());
    const res = await get(port, "/readyz");
    assert.equal(res.status, 500);
    assert.equal(
      res.body,
      [
        "[-]informers failed: pods not synced",
        "[-]ovn-nb failed: connection refused",
        "[-]slow failed: no answer within 100 ms",
        "readyz check failed",
        "",
      ].join("\n"),
    );
    assert.equal((await get(port, "/healthz")).status, 200, "readiness failures do not fail liveness");
    synced = true;
    hs.removeCheck("ovn-nb");
    hs.removeCheck("slow");
    assert.equal((await get(port, "/readyz")).status, 200);
  });

  it("answers /leaderz from its own checks: a standby fails it while /readyz stays ok", async (t) => {
    let leading = false;
    const hs = new HealthServer({ port: 0, host: "127.0.0.1" });
    hs.addReadinessCheck("ovn-nb", () => true);
    hs.addLeaderCheck("leading", () => leading || "standing by, the leader is replica-2");
    const port = await hs.start();
    t.after(() => hs.stop());
    const standby = await get(port, "/leaderz");
    assert.equal(standby.status, 500);
    assert.equal(
      standby.body,
      "[-]leading failed: standing by, the leader is replica-2\nleaderz check failed\n",
    );
    assert.equal((await get(port, "/readyz")).status, 200, "a standby is ready");
    leading = true;
    assert.deepEqual(
      [(await get(port, "/leaderz")).status, (await get(port, "/leaderz")).body],
      [200, "ok\n"],
    );
  });

  it("serves the metrics registry in the Prometheus text format on /metrics", async (t) => {
    const metrics = new Metrics({ processMetrics: false });
    metrics.setSubnetUsage("pods-a", { used: 3, available: 250 });
    const hs = new HealthServer({ port: 0, host: "127.0.0.1", metrics });
    const port = await hs.start();
    t.after(() => hs.stop());
    const res = await get(port, "/metrics");
    assert.equal(res.status, 200);
    assert.match(res.type, /^text\/plain; version=0\.0\.4/);
    assert.match(res.body, /zstack_ovn_ipam_addresses\{subnet="pods-a",state="used"\} 3/);
    assert.equal((await get(port, "/nothing")).status, 404);
  });
});
