import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { type IpAddress, parseIp } from "../ipam/address.ts";
import { type HostPortMapping, hostPortRuleset } from "./host-port-nat.ts";
import { type InterfaceName, parseInterfaceName } from "./interface-name.ts";

const MGMT = parseInterfaceName("zovn-mgmt");
const ip = (t: string) => parseIp(t);

function mapping(over: Partial<HostPortMapping> = {}): HostPortMapping {
  return {
    key: "uid\u00000\u00000\u00004",
    protocol: "tcp",
    hostPort: 8080,
    podIP: ip("10.244.0.5"),
    containerPort: 80,
    ...over,
  };
}

const rules = (script: string, chain: string) => {
  const start = script.indexOf(`  chain ${chain} {`);
  return script.slice(start, script.indexOf("  }", start));
};

describe("hostPortRuleset", () => {
  test("replaces the table in one transaction and maps a specific hostIP on both hooks, a wildcard through fib local", () => {
    const s = hostPortRuleset({
      mgmtIfname: MGMT,
      mappings: [
        mapping({ key: "a", hostIP: ip("192.168.200.11") }),
        mapping({ key: "b", protocol: "udp", hostPort: 53, containerPort: 5353 }),
      ],
    });
    assert.ok(s.startsWith("table inet zstack_ovn_hostport\ndelete table inet zstack_ovn_hostport\n"));
    assert.match(s, /elements = \{ 192\.168\.200\.11 \. 6 \. 8080 : goto h[0-9a-f]{16} \}/);
    assert.match(s, /elements = \{ 17 \. 53 : goto h[0-9a-f]{16} \}/);
    assert.match(s, /dnat ip to 10\.244\.0\.5:80\n/);
    assert.match(s, /dnat ip to 10\.244\.0\.5:5353\n/);
    for (const hook of ["nat_prerouting", "nat_output"]) {
      // Only traffic to the node itself: a hostIP that is not the node's captures nothing passing through.
      assert.match(rules(s, hook), /fib daddr type local ip daddr \. meta l4proto \. th dport vmap @addr_v4/);
    }
    assert.match(
      rules(s, "nat_prerouting"),
      /meta nfproto ipv4 fib daddr type local meta l4proto \. th dport vmap @any_v4/,
    );
    // From the node itself a wildcard never takes its loopback services.
    assert.match(
      rules(s, "nat_output"),
      /meta nfproto ipv4 ip daddr != 127\.0\.0\.0\/8 fib daddr type local meta l4proto \. th dport vmap @any_v4/,
    );
  });

  test("30,000 mappings render (no spread of the lines onto the call stack)", () => {
    const many = Array.from({ length: 30_000 }, (_, i) =>
      mapping({ key: `k${i}`, hostPort: 1 + (i % 60_000), protocol: i < 15_000 ? "tcp" : "udp" }),
    );
    const s = hostPortRuleset({ mgmtIfname: MGMT, mappings: many });
    assert.ok(s.length > 1_000_000);
  });

  test("127.0.0.1 is DNATed only from the node itself (output hook), never in prerouting, and masqueraded", () => {
    const s = hostPortRuleset({ mgmtIfname: MGMT, mappings: [mapping({ hostIP: ip("127.0.0.1") })] });
    assert.match(rules(s, "nat_output"), /vmap @lo_v4/);
    assert.doesNotMatch(rules(s, "nat_prerouting"), /@lo_v4/);
    assert.match(rules(s, "nat_prerouting"), /ip daddr 127\.0\.0\.0\/8 return/);
    assert.match(rules(s, "filter_prerouting"), /iifname "zovn-mgmt" ip daddr 127\.0\.0\.0\/8 drop/);
    assert.match(s, /meta iif 0 meta mark set meta mark \| 0x1000/);
    assert.match(rules(s, "nat_postrouting"), /meta mark & 0x1000 != 0 masquerade/);
  });

  test("IPv6 mappings print bracketed targets; no mapping leaves the hooks with no maps", () => {
    const s = hostPortRuleset({ mgmtIfname: MGMT, mappings: [mapping({ podIP: ip("fd00::5") })] });
    assert.match(s, /dnat ip6 to \[fd00::5\]:80/);
    assert.match(s, /meta nfproto ipv6 fib daddr type local/);
    const empty = hostPortRuleset({ mgmtIfname: MGMT, mappings: [] });
    assert.doesNotMatch(empty, /vmap|map /);
  });

  test("the same input renders the same text (a restart with nothing changed writes nothing)", () => {
    const ms = [mapping({ key: "a" }), mapping({ key: "b", hostPort: 9, hostIP: ip("192.168.200.11") })];
    assert.equal(
      hostPortRuleset({ mgmtIfname: MGMT, mappings: ms }),
      hostPortRuleset({ mgmtIfname: MGMT, mappings: [...ms] }),
    );
  });

  test("refuses values that are not the typed values they claim to be", () => {
    const bad: Partial<HostPortMapping>[] = [
      { podIP: "10.0.0.1; flush ruleset" as unknown as IpAddress },
      { hostIP: { family: 4, value: 1n << 40n } },
      { hostIP: ip("fd00::1") },
      { hostPort: 0 },
      { hostPort: 65536 },
      { containerPort: 1.5 },
      { protocol: "icmp" as "tcp" },
    ];
    for (const over of bad)
      assert.throws(
        () => hostPortRuleset({ mgmtIfname: MGMT, mappings: [mapping(over)] }),
        TypeError,
        JSON.stringify(over, (_k, v) => (typeof v === "bigint" ? String(v) : v)),
      );
    assert.throws(
      () => hostPortRuleset({ mgmtIfname: 'x" accept' as InterfaceName, mappings: [] }),
      TypeError,
    );
  });

  test("property: the key reaches the script only as a hex chain name", () => {
    const masked = (key: string) =>
      hostPortRuleset({ mgmtIfname: MGMT, mappings: [mapping({ key })] })
        .replace(/\bh[0-9a-f]{16}\b/g, "hX")
        .replace(/comment "[0-9a-f]{16}"/, 'comment "D"');
    const reference = masked("reference");
    fc.assert(
      fc.property(fc.string({ unit: "binary" }), (key) => {
        assert.equal(masked(key), reference);
      }),
    );
  });
});
