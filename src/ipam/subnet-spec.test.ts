import assert from "node:assert/strict";
import { test } from "node:test";
import { formatIp } from "./address.ts";
import { formatCidr } from "./cidr.ts";
import { formatProblem } from "./problem.ts";
import { formatRange } from "./range.ts";
import { parseSubnetSpec, validateSubnetSpec } from "./subnet-spec.ts";

const problems = (spec: unknown) => validateSubnetSpec(spec).map(formatProblem);

test("a valid IPv4 spec parses with its gateway, excluded ranges and VLAN", () => {
  const r = parseSubnetSpec({
    cidr: "192.168.100.0/24",
    gateway: "192.168.100.1",
    excludeIPs: ["192.168.100.1", "192.168.100.100-192.168.100.200", "192.168.100.250..192.168.100.254"],
    protocol: "IPv4",
    vlanID: 100,
    provider: "provider-net1",
  });
  assert.ok(r.ok);
  assert.equal(r.subnet.protocol, "IPv4");
  assert.deepEqual(r.subnet.cidrs.map(formatCidr), ["192.168.100.0/24"]);
  assert.deepEqual(r.subnet.gateways.map(formatIp), ["192.168.100.1"]);
  assert.deepEqual(
    r.subnet.excluded.map((e) => [e.field, formatRange(e.range)]),
    [
      ["spec.excludeIPs[0]", "192.168.100.1"],
      ["spec.excludeIPs[1]", "192.168.100.100-192.168.100.200"],
      ["spec.excludeIPs[2]", "192.168.100.250-192.168.100.254"],
    ],
  );
  assert.equal(r.subnet.vlanID, 100);
});

test("a Dual spec takes an IPv4,IPv6 pair in either order and keeps IPv4 first", () => {
  const r = parseSubnetSpec({
    cidr: "fd00:10:244::/64, 10.244.0.0/16",
    gateway: "10.244.0.1,fd00:10:244::1",
    excludeIPs: ["fd00:10:244::2..fd00:10:244::ff"],
    protocol: "Dual",
  });
  assert.ok(r.ok);
  assert.deepEqual(r.subnet.cidrs.map(formatCidr), ["10.244.0.0/16", "fd00:10:244::/64"]);
  assert.deepEqual(r.subnet.gateways.map(formatIp), ["10.244.0.1", "fd00:10:244::1"]);
});

test("protocol is inferred from cidr when absent", () => {
  const v6 = parseSubnetSpec({ cidr: "fd00::/64", gateway: "fd00::1" });
  assert.ok(v6.ok && v6.subnet.protocol === "IPv6");
  const dual = parseSubnetSpec({ cidr: "10.0.0.0/24,fd00::/64", gateway: "fd00::1,10.0.0.1" });
  assert.ok(dual.ok && dual.subnet.protocol === "Dual");
});

test("each bad field is reported with its path and a fix, all at once", () => {
  assert.deepEqual(
    problems({
      cidr: "10.0.0.0/24",
      gateway: "10.0.0.1",
      excludeIPs: ["10.0.0.5", "10.0.0.200-10.0.1.3", "10.0.0.9-10.0.0.3", "fd00::1", 7],
      protocol: "ipv4",
      vlanID: 4095,
    }),
    [
      'spec.protocol: "ipv4" has the wrong case; write IPv4',
      'spec.excludeIPs[1]: "10.0.0.200-10.0.1.3" reaches outside spec.cidr 10.0.0.0/24 (10.0.1.3); keep it within 10.0.0.0/24',
      'spec.excludeIPs[2]: "10.0.0.9-10.0.0.3" is a reversed range; write the lower address first',
      'spec.excludeIPs[3]: "fd00::1" is IPv6 but the subnet has no IPv6 CIDR; remove it',
      'spec.excludeIPs[4]: 7 must be a string, an address or a range like "a-b"',
      "spec.vlanID: 4095 is out of range; use 1-4094, or omit vlanID for an overlay subnet",
    ],
  );
});

test("cidr problems name the fix: host bits, family against protocol, pair shape", () => {
  assert.deepEqual(problems({ cidr: "10.244.0.1/16", gateway: "10.244.0.1" }), [
    'spec.cidr: "10.244.0.1/16" has host bits set; write the network address, 10.244.0.0/16 (the gateway goes in its own field)',
  ]);
  assert.deepEqual(problems({ cidr: "fd00::/64", gateway: "fd00::1", protocol: "IPv4" }), [
    'spec.protocol: "IPv4" does not match spec.cidr fd00::/64, which is IPv6; set protocol: IPv6',
  ]);
  assert.deepEqual(problems({ cidr: "10.1.0.0/16", gateway: "10.1.0.1", protocol: "Dual" }), [
    'spec.cidr: "10.1.0.0/16" has one CIDR, but protocol is Dual; add the IPv6 CIDR after a comma, e.g. "10.1.0.0/16,fd00:10:244::/64", or set protocol: IPv4',
  ]);
  assert.deepEqual(problems({ cidr: "10.1.0.0/16,10.2.0.0/16", gateway: "10.1.0.1", protocol: "Dual" }), [
    'spec.cidr: "10.1.0.0/16,10.2.0.0/16" has two IPv4 CIDRs; a Dual subnet has one IPv4 and one IPv6 CIDR, replace one with an IPv6 CIDR',
  ]);
  assert.deepEqual(problems({ cidr: "10.1.0.0/16,fd00::/64", gateway: "10.1.0.1", protocol: "IPv4" }), [
    'spec.cidr: "10.1.0.0/16,fd00::/64" has an IPv4 and an IPv6 CIDR, but protocol is IPv4; set protocol: Dual, or keep one CIDR',
  ]);
  assert.deepEqual(problems({ gateway: "10.1.0.1" }), [
    "spec.cidr: is required; write the subnet block, e.g. 10.244.0.0/16",
  ]);
});

test("gateway problems: missing, outside, network, broadcast, range, and missing family in Dual", () => {
  assert.deepEqual(problems({ cidr: "10.1.0.0/16" }), [
    'spec.gateway: is required; write the router address of the subnet, usually its first address, e.g. "10.1.0.1"',
  ]);
  assert.deepEqual(problems({ cidr: "10.1.0.0/16", gateway: "10.2.0.1" }), [
    'spec.gateway: "10.2.0.1" is outside spec.cidr 10.1.0.0/16; use an address inside it, e.g. 10.1.0.1',
  ]);
  assert.deepEqual(problems({ cidr: "10.1.0.0/16", gateway: "10.1.0.0" }), [
    'spec.gateway: "10.1.0.0" is the network address of 10.1.0.0/16; use a host address, usually 10.1.0.1',
  ]);
  assert.deepEqual(problems({ cidr: "10.1.0.0/16", gateway: "10.1.255.255" }), [
    'spec.gateway: "10.1.255.255" is the broadcast address of 10.1.0.0/16; use a host address, usually 10.1.0.1',
  ]);
  assert.deepEqual(problems({ cidr: "10.1.0.0/16", gateway: "10.1.0.1-10.1.0.2" }), [
    'spec.gateway: "10.1.0.1-10.1.0.2" is a range; the gateway is a single address',
  ]);
  assert.deepEqual(problems({ cidr: "10.1.0.0/16,fd00::/64", gateway: "10.1.0.1" }), [
    'spec.gateway: "10.1.0.1" has no IPv6 gateway for fd00::/64; give one per family, e.g. "10.1.0.1,fd00::1"',
  ]);
  assert.deepEqual(problems({ cidr: "10.1.0.0/16", gateway: "fd00::1" }), [
    'spec.gateway: "fd00::1" is IPv6 but spec.cidr has no IPv6 CIDR; write e.g. "10.1.0.1"',
  ]);
});

test("a gateway inside an excluded range is allowed, as in the examples of the design", () => {
  assert.deepEqual(
    problems({
      cidr: "10.244.0.0/16",
      gateway: "10.244.0.1",
      excludeIPs: ["10.244.0.1", "10.244.0.2-10.244.0.10"],
    }),
    [],
  );
});

test("wrong types are reported, not thrown", () => {
  assert.deepEqual(problems(null), ["spec: must be an object with at least cidr and gateway"]);
  assert.deepEqual(problems({ cidr: 10, gateway: "10.0.0.1", excludeIPs: "10.0.0.5", vlanID: "100" }), [
    'spec.cidr: 10 must be a string like "10.244.0.0/16"',
    'spec.excludeIPs: must be a list of addresses or ranges, e.g. ["10.244.0.2-10.244.0.10"]',
    'spec.vlanID: "100" is a string; write a number from 1 to 4094 without quotes',
  ]);
  assert.deepEqual(problems({ cidr: "10.0.0.0/24", gateway: "10.0.0.1", vlanID: 1.5 }), [
    "spec.vlanID: 1.5 must be a whole number from 1 to 4094",
  ]);
});

test("the gateway's syntax is still checked when cidr is broken", () => {
  assert.deepEqual(problems({ cidr: "10.0.0.0", gateway: "10.0.0.300" }), [
    'spec.cidr: "10.0.0.0" has no prefix length; write it like 10.0.0.0/24',
    'spec.gateway: "10.0.0.300" is not an IPv4 address: octet 300 is above 255',
  ]);
});

test("provider alone is a flat provider network; with vlanID a tagged one", () => {
  const flat = parseSubnetSpec({ cidr: "172.30.0.0/24", gateway: "172.30.0.1", provider: "physnet1" });
  assert.ok(flat.ok);
  assert.equal(flat.subnet.provider, "physnet1");
  assert.equal(flat.subnet.vlanID, undefined);
  const overlay = parseSubnetSpec({ cidr: "10.244.0.0/16", gateway: "10.244.0.1", provider: "" });
  assert.ok(overlay.ok && overlay.subnet.provider === undefined, "an empty provider is an overlay subnet");
});

test("vlanID without provider, a bad provider name, and provider with externalLogicalSwitch name the field and the fix", () => {
  assert.deepEqual(problems({ cidr: "172.30.0.0/24", gateway: "172.30.0.1", vlanID: 100 }), [
    "spec.provider: is required with spec.vlanID: name the provider network that carries the VLAN (each node maps it to a bridge with ovn-bridge-mappings), or remove vlanID for an overlay subnet",
  ]);
  for (const bad of ["phys:net", "a,b", "-x", "x-", "with space", "x".repeat(65), "ünï"]) {
    const p = problems({ cidr: "172.30.0.0/24", gateway: "172.30.0.1", vlanID: 100, provider: bad });
    assert.equal(p.length, 1, `${bad}: ${p.join("; ")}`);
    assert.match(p[0] as string, /^spec\.provider: /);
  }
  assert.deepEqual(problems({ cidr: "172.30.0.0/24", gateway: "172.30.0.1", provider: 7 }), [
    'spec.provider: 7 must be a string naming a provider network, e.g. "physnet1"',
  ]);
  assert.deepEqual(
    problems({
      cidr: "172.30.0.0/24",
      gateway: "172.30.0.1",
      provider: "physnet1",
      externalLogicalSwitch: "zstack-l3",
    }),
    [
      "spec.provider: cannot be combined with spec.externalLogicalSwitch: an external switch brings its own localnet port; remove provider and vlanID",
    ],
  );
  for (const good of ["physnet1", "provider-net1", "p", "a.b_c-1", "x".repeat(64)]) {
    const r = parseSubnetSpec({ cidr: "172.30.0.0/24", gateway: "172.30.0.1", vlanID: 7, provider: good });
    assert.ok(r.ok && r.subnet.provider === good, good);
  }
});
