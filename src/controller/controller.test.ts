import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { defaultSubnetSpec } from "./controller.ts";

describe("defaultSubnetSpec", () => {
  it("names the protocol of the cluster CIDR's families, which the CRD requires for IPv6 and dual-stack", () => {
    assert.deepEqual(defaultSubnetSpec("10.244.0.0/16"), {
      cidr: "10.244.0.0/16",
      gateway: "10.244.0.1",
      protocol: "IPv4",
      default: true,
    });
    assert.deepEqual(defaultSubnetSpec("fd00:10:244::/48"), {
      cidr: "fd00:10:244::/48",
      gateway: "fd00:10:244::1",
      protocol: "IPv6",
      default: true,
    });
    assert.deepEqual(defaultSubnetSpec("10.244.0.0/16, fd00:10:244::/48"), {
      cidr: "10.244.0.0/16,fd00:10:244::/48",
      gateway: "10.244.0.1,fd00:10:244::1",
      protocol: "Dual",
      default: true,
    });
  });
});
