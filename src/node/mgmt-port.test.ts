import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { mgmtInterfaceLines, parseMgmtPortAnnotation } from "./mgmt-port.ts";

const SPEC = {
  bridge: "br-int",
  lspName: "zovn-mgmt-node1",
  mac: "0a:58:64:40:00:02",
  ip: "100.64.0.2/16",
  gateway: "100.64.0.1",
  routeCidrs: ["10.244.0.0/16", "10.96.0.0/16", "fd00::/48"],
  mtu: 1450,
};

describe("management port", () => {
  test("the annotation the controller writes parses; anything malformed is treated as not there yet", () => {
    const v = {
      name: "zovn-mgmt-node1",
      ip: "100.64.0.2/16",
      mac: "0a:58:64:40:00:02",
      gateway: "100.64.0.1",
    };
    assert.deepEqual(parseMgmtPortAnnotation(JSON.stringify(v)), v);
    for (const bad of [
      undefined,
      "",
      "{",
      "null",
      JSON.stringify({ ...v, ip: "100.64.0.2" }),
      JSON.stringify({ ...v, mac: "zz" }),
      JSON.stringify({ ...v, gateway: "x" }),
      JSON.stringify({ ...v, name: "" }),
    ])
      assert.equal(parseMgmtPortAnnotation(bad), undefined, String(bad));
  });

  test("the device gets MAC, MTU, address and a route per same-family CIDR with the management source", () => {
    assert.deepEqual(
      mgmtInterfaceLines(SPEC, false).map((l) => l.join(" ")),
      [
        "link set dev zovn-mgmt address 0a:58:64:40:00:02 mtu 1450 up",
        "addr replace 100.64.0.2/16 dev zovn-mgmt",
        "route replace 10.244.0.0/16 via 100.64.0.1 dev zovn-mgmt src 100.64.0.2",
        "route replace 10.96.0.0/16 via 100.64.0.1 dev zovn-mgmt src 100.64.0.2",
      ],
    );
  });

  test("a changed address first flushes the old global ones", () => {
    assert.equal(mgmtInterfaceLines(SPEC, true)[1]?.join(" "), "addr flush dev zovn-mgmt scope global");
  });
});
