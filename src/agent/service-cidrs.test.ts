import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parseIp } from "../ipam/address.ts";
import { formatCidr, parseCidr } from "../ipam/cidr.ts";
import { planServiceCidrRoutes } from "./service-cidrs.ts";
import type { RouteGuard } from "./subnet-routes.ts";

const guard: RouteGuard = {
  joinCidr: parseCidr("100.64.0.0/16"),
  serviceCidrs: [parseCidr("10.96.0.0/16")],
  nodeIps: [parseIp("192.168.200.11")],
  hostIps: [{ ip: parseIp("192.168.200.2"), what: "the API server's address" }],
  uplinkCidrs: [parseCidr("192.168.200.0/24")],
};
const cluster = [parseCidr("10.244.0.0/16")];
const obj = (name: string, cidrs: unknown) => ({ metadata: { name }, spec: { cidrs } });

describe("ServiceCIDR routes", () => {
  test("routes every range of every ServiceCIDR, the configured one included, each once", () => {
    const plan = planServiceCidrRoutes(
      [
        obj("kubernetes", ["10.96.0.0/16"]),
        obj("extra", ["10.97.0.0/16", "fd00:97::/112"]),
        obj("dup", ["10.97.0.0/16"]),
      ],
      guard,
      cluster,
    );
    assert.deepEqual(plan.cidrs.map(formatCidr), ["10.96.0.0/16", "10.97.0.0/16", "fd00:97::/112"]);
    assert.deepEqual(plan.refused, []);
  });

  test("refuses ranges that would capture the node's own traffic or pods, naming the field", () => {
    const plan = planServiceCidrRoutes(
      [
        obj("uplink", ["192.168.200.0/28"]),
        obj("pods", ["10.244.1.0/24"]),
        obj("join", ["100.64.0.0/20"]),
        obj("wide", ["10.0.0.0/7"]),
        obj("loopback", ["127.0.0.0/8"]),
        obj("junk", ["10.98.0.0/16\nflush ruleset", 7]),
        obj("empty", undefined),
      ],
      guard,
      cluster,
    );
    assert.deepEqual(plan.cidrs, []);
    const reasons = Object.fromEntries(plan.refused.map((r) => [r.serviceCidr, r.reason]));
    assert.match(
      reasons.uplink ?? "",
      /spec\.cidrs\[0\] 192\.168\.200\.0\/28 contains the node's own address|uplink/,
    );
    assert.match(reasons.pods ?? "", /cluster network 10\.244\.0\.0\/16/);
    assert.match(reasons.join ?? "", /join network/);
    assert.match(reasons.wide ?? "", /wider than \/8/);
    assert.match(reasons.loopback ?? "", /overlaps the/);
    assert.match(reasons.junk ?? "", /spec\.cidrs\[/);
    assert.match(reasons.empty ?? "", /not a list/);
    assert.equal(plan.refused.filter((r) => r.serviceCidr === "junk").length, 2);
  });
});
