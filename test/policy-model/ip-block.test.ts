import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { inIpBlock } from "./ip-block.ts";

describe("ipBlock (model)", () => {
  it("the docs' example: 172.17.0.0/16 except 172.17.1.0/24", () => {
    const block = { cidr: "172.17.0.0/16", except: ["172.17.1.0/24"] };
    assert.equal(inIpBlock(block, "172.17.0.5"), true);
    assert.equal(inIpBlock(block, "172.17.2.200"), true);
    assert.equal(inIpBlock(block, "172.17.1.5"), false);
    assert.equal(inIpBlock(block, "172.18.0.1"), false);
  });
  it("/32 and /0 edges", () => {
    assert.equal(inIpBlock({ cidr: "10.244.1.7/32" }, "10.244.1.7"), true);
    assert.equal(inIpBlock({ cidr: "10.244.1.7/32" }, "10.244.1.8"), false);
    assert.equal(inIpBlock({ cidr: "0.0.0.0/0" }, "203.0.113.9"), true);
    assert.equal(inIpBlock({ cidr: "0.0.0.0/0", except: ["10.244.1.7/32"] }, "10.244.1.7"), false);
  });
  it("IPv6 blocks never hold IPv4 addresses and match IPv6 ones", () => {
    assert.equal(inIpBlock({ cidr: "::/0" }, "10.0.0.1"), false);
    assert.equal(inIpBlock({ cidr: "fd00:10:244::/48" }, "fd00:10:244:1::5"), true);
    assert.equal(
      inIpBlock({ cidr: "fd00:10:244::/48", except: ["fd00:10:244:1::/64"] }, "fd00:10:244:1::5"),
      false,
    );
    assert.equal(inIpBlock({ cidr: "::ffff:0:0/96" }, "::ffff:10.0.0.1"), true);
  });
  it("refuses a CIDR without prefix or with a prefix beyond the family", () => {
    assert.throws(() => inIpBlock({ cidr: "10.0.0.0" }, "10.0.0.1"), /no prefix/);
    assert.throws(() => inIpBlock({ cidr: "10.0.0.0/33" }, "10.0.0.1"), /bad CIDR/);
  });
});
