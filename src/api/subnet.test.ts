import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { findCondition, isConditionTrue, removeCondition, setCondition } from "./condition.ts";
import {
  newSubnet,
  parseExcludeEntry,
  SUBNET_PATH,
  subnetCidrs,
  subnetGateways,
  subnetProtocol,
  subnetReadyCondition,
  subnetStatus,
} from "./subnet.ts";

const t0 = new Date("2026-01-02T03:04:05.678Z");
const t1 = new Date("2026-01-02T03:09:00.000Z");

describe("conditions", () => {
  it("adds a condition with lastTransitionTime at second precision", () => {
    const list = setCondition(
      undefined,
      { type: "Ready", status: "False", reason: "Pending", message: "m" },
      t0,
    );
    assert.deepEqual(list, [
      {
        type: "Ready",
        status: "False",
        reason: "Pending",
        message: "m",
        lastTransitionTime: "2026-01-02T03:04:05Z",
      },
    ]);
  });

  it("keeps lastTransitionTime while the status stays, and moves it when the status changes", () => {
    const a = setCondition(undefined, { type: "Ready", status: "False", reason: "A", message: "a" }, t0);
    const b = setCondition(a, { type: "Ready", status: "False", reason: "B", message: "b" }, t1);
    assert.equal(b[0]?.lastTransitionTime, "2026-01-02T03:04:05Z");
    assert.equal(b[0]?.reason, "B");
    const c = setCondition(b, { type: "Ready", status: "True", reason: "Ok", message: "ok" }, t1);
    assert.equal(c[0]?.lastTransitionTime, "2026-01-02T03:09:00Z");
    assert.equal(a.length, 1, "the input list is not modified");
    assert.equal(a[0]?.reason, "A");
  });

  it("finds, tests and removes conditions by type", () => {
    let list = setCondition(undefined, { type: "Ready", status: "True", reason: "Ok", message: "" }, t0);
    list = setCondition(list, { type: "Degraded", status: "False", reason: "Fine", message: "" }, t0);
    assert.equal(findCondition(list, "Degraded")?.reason, "Fine");
    assert.equal(isConditionTrue(list, "Ready"), true);
    assert.equal(isConditionTrue(list, "Degraded"), false);
    assert.equal(isConditionTrue(list, "Missing"), false);
    assert.deepEqual(
      removeCondition(list, "Ready").map((c) => c.type),
      ["Degraded"],
    );
  });
});

describe("Subnet", () => {
  it("builds a Subnet object for the network.zstack.io/v1 API", () => {
    assert.deepEqual(newSubnet("pods", { cidr: "10.244.0.0/16", gateway: "10.244.0.1" }, { team: "a" }), {
      apiVersion: "network.zstack.io/v1",
      kind: "Subnet",
      metadata: { name: "pods", labels: { team: "a" } },
      spec: { cidr: "10.244.0.0/16", gateway: "10.244.0.1" },
    });
    assert.equal(SUBNET_PATH, "/apis/network.zstack.io/v1/subnets");
  });

  it("splits dual-stack CIDRs and gateways and defaults the protocol to IPv4", () => {
    const spec = { cidr: "10.1.0.0/16,fd00::/64", gateway: "10.1.0.1,fd00::1", protocol: "Dual" as const };
    assert.deepEqual(subnetCidrs(spec), ["10.1.0.0/16", "fd00::/64"]);
    assert.deepEqual(subnetGateways(spec), ["10.1.0.1", "fd00::1"]);
    assert.equal(subnetProtocol(spec), "Dual");
    assert.equal(subnetProtocol({ cidr: "10.1.0.0/16", gateway: "10.1.0.1" }), "IPv4");
  });

  it("reads excludeIPs entries in all three forms", () => {
    assert.deepEqual(parseExcludeEntry("10.0.0.5"), { start: "10.0.0.5", end: "10.0.0.5" });
    assert.deepEqual(parseExcludeEntry("10.0.0.5-10.0.0.9"), { start: "10.0.0.5", end: "10.0.0.9" });
    assert.deepEqual(parseExcludeEntry("fd00::5..fd00::9"), { start: "fd00::5", end: "fd00::9" });
  });

  it("builds a status whose phase, Ready condition and observedGeneration agree", () => {
    const subnet = newSubnet("pods", { cidr: "10.244.0.0/16", gateway: "10.244.0.1" });
    subnet.metadata.generation = 3;
    const pending = subnetStatus(
      subnet,
      { phase: "Pending", reason: "Creating", message: "creating switch" },
      {},
      t0,
    );
    assert.equal(pending.conditions?.[0]?.status, "Unknown");
    subnet.status = pending;
    const active = subnetStatus(
      subnet,
      { phase: "Active", reason: "LogicalSwitchReady", message: "ready" },
      { usedIPs: 1, availableIPs: 65_532, logicalSwitch: "subnet-pods" },
      t1,
    );
    assert.equal(active.phase, "Active");
    assert.equal(active.observedGeneration, 3);
    assert.equal(active.logicalSwitch, "subnet-pods");
    assert.deepEqual(active.conditions, [
      {
        type: "Ready",
        status: "True",
        reason: "LogicalSwitchReady",
        message: "ready",
        observedGeneration: 3,
        lastTransitionTime: "2026-01-02T03:09:00Z",
      },
    ]);
    subnet.status = active;
    assert.equal(subnetReadyCondition(subnet)?.status, "True");
    const failed = subnetStatus(
      subnet,
      { phase: "Failed", reason: "Overlap", message: "overlaps pods-b" },
      {},
      t1,
    );
    assert.equal(failed.conditions?.[0]?.status, "False");
    assert.equal(failed.usedIPs, 1, "fields not given are kept");
  });
});
