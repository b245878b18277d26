import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { podMtu } from "./mtu.ts";

describe("pod MTU", () => {
  test("is the encap interface's MTU minus 50 for VXLAN and minus 100 for Geneve", () => {
    assert.equal(podMtu({ encapMtu: 1500, encapType: "vxlan" }), 1450);
    assert.equal(podMtu({ encapMtu: 1500, encapType: "geneve" }), 1400);
    assert.equal(podMtu({ encapMtu: 9000, encapType: "geneve" }), 8900);
  });

  test("is the configured value when one is given", () => {
    assert.equal(podMtu({ encapMtu: 1500, encapType: "vxlan", override: 1300 }), 1300);
  });

  test("refuses a result below IPv4's minimum or not an integer", () => {
    assert.throws(() => podMtu({ encapMtu: 600, encapType: "geneve" }), RangeError);
    assert.throws(() => podMtu({ encapMtu: 1500, encapType: "vxlan", override: 1400.5 }), RangeError);
  });
});
