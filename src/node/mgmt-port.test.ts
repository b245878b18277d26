import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parseCidr } from "../ipam/cidr.ts";
import { mgmtInterfaceLines, parseMgmtPortAnnotation, staleMgmtRouteLines } from "./mgmt-port.ts";

const SPEC = {
  bridge: "br-int",
  lspName: "zovn-mgmt-node1",
  mac: "0a:58:64:40:00:02",
  ip: "100.64.0.2/16",
  gateway: "100.64.0.1",
  routeCidrs: ["10.244.0.0/16", "10.96.0.0/16", "fd00::/48"].map((c) => parseCidr(c)),
  mtu: 1450,
};

describe("management port", () => {
  const EXPECT = { node: "node1", joinCidr: parseCidr("100.64.0.0/16") };
  const v = {
    name: "zovn-mgmt-node1",
    ip: "100.64.0.2/16",
    mac: "0a:58:64:40:00:02",
    gateway: "100.64.0.1",
  };

  test("the annotation the controller writes parses; anything malformed is treated as not there yet", () => {
    assert.deepEqual(parseMgmtPortAnnotation(JSON.stringify(v), EXPECT), v);
    const withSnat = { ...v, serviceSnatIp: "100.64.0.3" };
    assert.deepEqual(parseMgmtPortAnnotation(JSON.stringify(withSnat), EXPECT), withSnat);
    for (const bad of [
      undefined,
      "",
      "{",
      "null",
      JSON.stringify({ ...v, ip: "100.64.0.2" }),
      JSON.stringify({ ...v, mac: "zz" }),
      JSON.stringify({ ...v, gateway: "x" }),
      JSON.stringify({ ...v, name: "" }),
      JSON.stringify({ ...v, ip: "100.64.0.2/16 dev lo" }),
      JSON.stringify({ ...v, ip: "100.64.0.2/16\nnetns add x" }),
      JSON.stringify({ ...v, gateway: "100.64.0.1 table 5" }),
      JSON.stringify({ ...v, gateway: "fd00::1" }),
      JSON.stringify({ ...v, mac: "0a:58:64:40:00:02\n" }),
      JSON.stringify({ ...v, name: "a b" }),
    ])
      assert.equal(parseMgmtPortAnnotation(bad, EXPECT), undefined, String(bad));
  });

  test("an annotation naming another port, or an address or gateway off the join network, is refused with why", () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{ name: "zovn-mgmt-node2" }, /not this node's zovn-mgmt-node1/],
      [{ name: "default_victim-pod" }, /not this node's/],
      [{ ip: "10.244.0.7/16" }, /not a host address of the join network 100\.64\.0\.0\/16/],
      [{ ip: "100.64.0.2/8" }, /prefix length \/16/],
      [{ ip: "100.64.0.2/24" }, /prefix length \/16/],
      [{ ip: "100.64.0.0/16" }, /ip 100\.64\.0\.0 is not a host address/],
      [{ ip: "100.64.255.255/16" }, /ip 100\.64\.255\.255 is not a host address/],
      [{ gateway: "0.0.0.0" }, /gateway 0\.0\.0\.0 is not a host address/],
      [{ gateway: "192.168.1.1" }, /gateway 192\.168\.1\.1 is not a host address/],
      [{ gateway: "100.64.0.2" }, /both 100\.64\.0\.2/],
      [
        { serviceSnatIp: "10.244.0.9" },
        /serviceSnatIp 10\.244\.0\.9 is not a host address of the join network/,
      ],
      [{ serviceSnatIp: "100.64.0.2" }, /serviceSnatIp 100\.64\.0\.2 is also the ip or the gateway/],
      [{ serviceSnatIp: "100.64.0.1" }, /also the ip or the gateway/],
      [{ serviceSnatIp: "100.64.0.3 table 5" }, /serviceSnatIp/],
    ];
    for (const [change, why] of cases) {
      const reasons: string[] = [];
      const out = parseMgmtPortAnnotation(JSON.stringify({ ...v, ...change }), EXPECT, (r) =>
        reasons.push(r),
      );
      assert.equal(out, undefined, JSON.stringify(change));
      assert.match(reasons.join(";"), why, JSON.stringify(change));
    }
  });

  test("nodeReplyIps: canonical, sorted and once each; anything but a list of IPv4 addresses off the join network is refused", () => {
    const out = parseMgmtPortAnnotation(
      JSON.stringify({ ...v, nodeReplyIps: ["192.168.200.12", "192.168.200.11", "192.168.200.12"] }),
      EXPECT,
    );
    assert.deepEqual(out?.nodeReplyIps, ["192.168.200.11", "192.168.200.12"]);
    assert.equal(
      parseMgmtPortAnnotation(JSON.stringify({ ...v, nodeReplyIps: [] }), EXPECT)?.nodeReplyIps,
      undefined,
    );
    const cases: [unknown, RegExp][] = [
      ["192.168.200.11", /must be a list/],
      [[7], /nodeReplyIps\[0\] must be a string/],
      [["192.168.200.11", "fd00::11"], /nodeReplyIps\[1\] fd00::11 is not an IPv4 address/],
      [["100.64.0.9"], /inside the join network/],
      [["192.168.200.11 table 5"], /nodeReplyIps\[0\]/],
      [["192.168.200.11/32"], /nodeReplyIps\[0\]/],
    ];
    for (const [bad, why] of cases) {
      const reasons: string[] = [];
      const got = parseMgmtPortAnnotation(JSON.stringify({ ...v, nodeReplyIps: bad }), EXPECT, (r) =>
        reasons.push(r),
      );
      assert.equal(got, undefined, JSON.stringify(bad));
      assert.match(reasons.join(";"), why, JSON.stringify(bad));
    }
  });

  test("a nodeReplyIps longer than 16 is ignored, the rest of the annotation still applies", () => {
    const list = (n: number) => Array.from({ length: n }, (_, i) => `192.168.200.${i + 1}`);
    const refused: string[] = [];
    const ignored: string[] = [];
    const got = parseMgmtPortAnnotation(
      JSON.stringify({ ...v, serviceSnatIp: "100.64.0.9", nodeReplyIps: list(17) }),
      EXPECT,
      (r) => refused.push(r),
      (r) => ignored.push(r),
    );
    assert.deepEqual(refused, []);
    assert.match(ignored.join(";"), /nodeReplyIps lists 17 addresses, more than 16: ignored/);
    assert.equal(got?.name, v.name);
    assert.equal(got?.serviceSnatIp, "100.64.0.9");
    assert.equal(got?.nodeReplyIps, undefined);
    // Exactly the cap is kept whole, and nothing is reported.
    const full = parseMgmtPortAnnotation(
      JSON.stringify({ ...v, nodeReplyIps: list(16) }),
      EXPECT,
      undefined,
      (r) => ignored.push(r),
    );
    assert.equal(full?.nodeReplyIps?.length, 16);
    assert.equal(ignored.length, 1);
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

  test("routes on the device that the spec does not want are deleted, the kernel's own are kept", () => {
    const lines = staleMgmtRouteLines(SPEC, [
      { dst: "100.64.0.0/16", protocol: "kernel", family: 4 },
      { dst: "10.244.0.0/16", family: 4 },
      { dst: "10.250.0.0/24", family: 4 },
      { dst: "10.9.9.9", protocol: "static", family: 4 },
      { dst: "default", family: 6 },
      { dst: "fd00::/48", family: 6 },
    ]);
    assert.deepEqual(
      lines.map((l) => l.join(" ")),
      [
        "route del 10.250.0.0/24 dev zovn-mgmt",
        "route del 10.9.9.9/32 dev zovn-mgmt",
        "route del ::/0 dev zovn-mgmt",
      ],
    );
  });

  test("a changed address first flushes the old global ones", () => {
    assert.equal(mgmtInterfaceLines(SPEC, true)[1]?.join(" "), "addr flush dev zovn-mgmt scope global");
  });
});
