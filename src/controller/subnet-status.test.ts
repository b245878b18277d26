import assert from "node:assert/strict";
import { test } from "node:test";
import { SubnetAllocator } from "../ipam/allocator.ts";
import { parseSubnetSpec } from "../ipam/subnet-spec.ts";
import type { ExternalSwitchLookup } from "../ovn/external-switch.ts";
import { type ClusterFacts, judgeSubnets, statusFor } from "./subnet-status.ts";

const FACTS: ClusterFacts = {
  serviceCIDRs: ["10.96.0.0/16"],
  joinCIDR: "100.64.0.0/16",
  nodeIPs: new Map([["node1", ["192.168.200.11"]]]),
  switchExists: (n) => n === "ls-zstack-1",
  tunnel: "vxlan",
  datapaths: 3,
  subnetSwitchExists: () => false,
};
const sn = (name: string, t: string, spec: Record<string, unknown>) => ({ name, creationTimestamp: t, spec });

test("the older of two overlapping subnets stays Ready and the newer one names it", () => {
  const v = judgeSubnets(
    [
      sn("b", "2026-01-02T00:00:00Z", { cidr: "10.1.0.0/24", gateway: "10.1.0.1" }),
      sn("a", "2026-01-01T00:00:00Z", { cidr: "10.1.0.0/16", gateway: "10.1.0.1" }),
    ],
    FACTS,
  );
  assert.equal(v.get("a")?.ready, true);
  assert.equal(v.get("b")?.phase, "Failed");
  assert.match(v.get("b")?.message ?? "", /overlaps Subnet a \(10\.1\.0\.0\/16\)/);
});

test("overlaps with the service CIDR, the join CIDR and a node address are each named", () => {
  const v = judgeSubnets(
    [
      sn("svc", "1", { cidr: "10.96.5.0/24", gateway: "10.96.5.1" }),
      sn("join", "2", { cidr: "100.64.8.0/24", gateway: "100.64.8.1" }),
      sn("node", "3", { cidr: "192.168.200.0/24", gateway: "192.168.200.254" }),
    ],
    FACTS,
  );
  assert.match(v.get("svc")?.message ?? "", /service CIDR 10\.96\.0\.0\/16/);
  assert.match(v.get("join")?.message ?? "", /join CIDR 100\.64\.0\.0\/16/);
  assert.match(v.get("node")?.message ?? "", /192\.168\.200\.11, an address of node node1/);
});

test("a subnet in a reserved range (link-local, loopback, multicast) is Failed with ReservedRange, naming the range", () => {
  const v = judgeSubnets(
    [
      sn("metadata", "1", { cidr: "169.254.169.0/24", gateway: "169.254.169.1" }),
      sn("loop", "2", { cidr: "127.0.0.0/16", gateway: "127.0.0.1" }),
      sn("mcast", "3", { cidr: "224.0.0.0/8", gateway: "224.0.0.1" }),
      sn("ll6", "4", { cidr: "fe80::/64", gateway: "fe80::1", protocol: "IPv6" }),
      sn("fine", "5", { cidr: "10.50.0.0/24", gateway: "10.50.0.1" }),
    ],
    FACTS,
  );
  for (const [name, range] of [
    ["metadata", "169.254.0.0/16"],
    ["loop", "127.0.0.0/8"],
    ["mcast", "224.0.0.0/4"],
    ["ll6", "fe80::/10"],
  ] as const) {
    assert.equal(v.get(name)?.reason, "ReservedRange", name);
    assert.match(
      v.get(name)?.message ?? "",
      new RegExp(`overlaps the .* ${range.replace(/\./g, "\\.")}`),
      name,
    );
  }
  assert.equal(v.get("fine")?.ready, true);
});

test("a missing external switch fails the subnet with the switch's name; an existing one is fine", () => {
  const v = judgeSubnets(
    [
      sn("ext", "1", { cidr: "10.100.0.0/24", gateway: "10.100.0.1", externalLogicalSwitch: "ls-missing" }),
      sn("ok", "2", { cidr: "10.101.0.0/24", gateway: "10.101.0.1", externalLogicalSwitch: "ls-zstack-1" }),
    ],
    FACTS,
  );
  assert.equal(v.get("ext")?.reason, "ExternalSwitchNotFound");
  assert.match(v.get("ext")?.message ?? "", /ls-missing/);
  assert.equal(v.get("ok")?.ready, true);
});

test("an exhausted subnet stays Active but not Ready, and becomes Ready again when an address is freed", () => {
  const spec = { cidr: "10.7.0.0/29", gateway: "10.7.0.1" };
  const [v] = [...judgeSubnets([sn("small", "1", spec)], FACTS).values()];
  const def = parseSubnetSpec(spec);
  assert.ok(def.ok && v);
  const alloc = SubnetAllocator.create(def.subnet);
  const owners: string[] = [];
  for (let i = 0; alloc.allocate(`p${i}`).ok; i++) owners.push(`p${i}`);
  const s1 = statusFor(
    v,
    { capacity: alloc.capacity(), ports: owners.length, logicalSwitch: "subnet-small" },
    FACTS,
  );
  assert.equal(s1.phase, "Active");
  assert.equal(s1.conditions[0]?.status, "False");
  assert.equal(s1.conditions[0]?.reason, "AddressesExhausted");
  assert.equal(s1.availableIPs, 0);
  alloc.releaseOwner(owners[0] as string);
  const s2 = statusFor(
    v,
    { capacity: alloc.capacity(), ports: owners.length - 1, logicalSwitch: "subnet-small" },
    FACTS,
    s1.conditions[0],
  );
  assert.equal(s2.conditions[0]?.status, "True");
  assert.equal(s2.availableIPs, 1);
  assert.equal(s2.portCapacity, 5, "a /29 has 5 usable addresses, below the VXLAN port limit");
});

test("port capacity is capped at 2048 under VXLAN and not under Geneve", () => {
  const spec = { cidr: "10.8.0.0/16", gateway: "10.8.0.1" };
  const [v] = [...judgeSubnets([sn("big", "1", spec)], FACTS).values()];
  const def = parseSubnetSpec(spec);
  assert.ok(def.ok && v);
  const cap = SubnetAllocator.create(def.subnet).capacity();
  assert.equal(statusFor(v, { capacity: cap, ports: 0, logicalSwitch: "x" }, FACTS).portCapacity, 2048);
  assert.equal(
    statusFor(v, { capacity: cap, ports: 0, logicalSwitch: "x" }, { tunnel: "geneve" }).portCapacity,
    65533,
  );
});

test("under VXLAN the oldest new Subnets get the datapaths left, the next is refused by name, and existing switches stay", () => {
  const subnets = [
    sn("a", "1", { cidr: "10.1.0.0/24", gateway: "10.1.0.1" }),
    sn("b", "2", { cidr: "10.2.0.0/24", gateway: "10.2.0.1" }),
    sn("c", "3", { cidr: "10.3.0.0/24", gateway: "10.3.0.1" }),
    sn("old", "0", { cidr: "10.4.0.0/24", gateway: "10.4.0.1" }),
    sn("ext", "4", { cidr: "10.5.0.0/24", gateway: "10.5.0.1", externalLogicalSwitch: "ls-zstack-1" }),
  ];
  const full = { ...FACTS, datapaths: 4094, subnetSwitchExists: (n: string) => n === "old" };
  const v = judgeSubnets(subnets, full);
  assert.equal(v.get("old")?.ready, true, "a Subnet whose switch exists needs no new datapath");
  assert.equal(v.get("a")?.ready, true);
  assert.equal(v.get("b")?.ready, true);
  assert.equal(v.get("c")?.phase, "Failed");
  assert.equal(v.get("c")?.reason, "DatapathCapacityExceeded");
  assert.match(v.get("c")?.message ?? "", /4096 logical switches and routers.*4096 with VXLAN.*Geneve/);
  assert.equal(v.get("ext")?.ready, true, "an external switch is an existing datapath");
  const geneve = judgeSubnets(subnets, { ...full, tunnel: "geneve" });
  assert.ok(
    [...geneve.values()].every((x) => x.ready),
    "Geneve has no such limit",
  );
});

test("a provider network Subnet inside clusterCIDR is Failed naming spec.cidr and the fix; an overlay Subnet there is fine", () => {
  const facts = { ...FACTS, clusterCIDRs: ["10.244.0.0/16"] };
  const v = judgeSubnets(
    [
      sn("vlan", "1", {
        cidr: "10.244.100.0/24",
        gateway: "10.244.100.1",
        vlanID: 100,
        provider: "physnet1",
      }),
      sn("flat", "2", { cidr: "10.0.0.0/8", gateway: "10.0.0.1", provider: "physnet2" }),
      sn("overlay", "3", { cidr: "10.244.7.0/24", gateway: "10.244.7.1" }),
      sn("outside", "4", { cidr: "172.30.100.0/24", gateway: "172.30.100.1", provider: "physnet1" }),
    ],
    facts,
  );
  for (const name of ["vlan", "flat"]) {
    assert.equal(v.get(name)?.phase, "Failed", name);
    assert.equal(v.get(name)?.reason, "Overlap");
    assert.match(v.get(name)?.message ?? "", /spec\.cidr .* overlaps the cluster CIDR 10\.244\.0\.0\/16/);
    assert.match(
      v.get(name)?.message ?? "",
      /must lie outside clusterCIDR, the service CIDR and the join CIDR/,
    );
  }
  assert.equal(v.get("overlay")?.ready, true);
  assert.equal(v.get("outside")?.ready, true);
});

test("an external switch is checked against its other_config:subnet, router ports and DHCP options, naming the row", () => {
  const facts = {
    uuid: "6b1f0000-0000-4000-8000-000000000001",
    name: "l3-vpc-network",
    ours: false,
    otherConfigSubnet: "10.60.0.0/24",
    routerPorts: [
      {
        uuid: "aaaa0000-0000-4000-8000-000000000002",
        name: "lrp-vpc",
        networks: ["10.60.0.1/24", "fd60::1/64"],
      },
    ],
    dhcpOptions: [
      { uuid: "bbbb0000-0000-4000-8000-000000000003", cidr: "10.60.0.0/24", router: "10.60.0.1" },
      { uuid: "cccc0000-0000-4000-8000-000000000004", cidr: "fd60::/64" },
    ],
  };
  const judge = (spec: Record<string, unknown>, lookup: ExternalSwitchLookup) =>
    judgeSubnets([sn("ext", "1", { externalLogicalSwitch: "l3-vpc-network", ...spec })], {
      ...FACTS,
      externalSwitch: () => lookup,
    }).get("ext");
  const found = { kind: "found", facts } as const;
  const ok = judge({ cidr: "10.60.0.0/24,fd60::/64", gateway: "10.60.0.1,fd60::1" }, found);
  assert.equal(ok?.ready, true, ok?.message);
  assert.deepEqual(ok?.externalSwitch, { uuid: facts.uuid, name: "l3-vpc-network" });
  const cidr = judge({ cidr: "10.70.0.0/24", gateway: "10.70.0.1" }, found);
  assert.equal(cidr?.reason, "ExternalSwitchMismatch");
  assert.match(cidr?.message ?? "", /Logical_Switch 6b1f0000-.* other_config:subnet=10\.60\.0\.0\/24/);
  const gw = judge({ cidr: "10.60.0.0/24", gateway: "10.60.0.254" }, found);
  assert.equal(gw?.reason, "ExternalSwitchMismatch");
  assert.match(
    gw?.message ?? "",
    /spec\.gateway 10\.60\.0\.254 is not ZStack's router port.*Logical_Router_Port aaaa0000-.*use 10\.60\.0\.1/,
  );
  const v6 = judge({ cidr: "10.60.0.0/24,fd61::/64", gateway: "10.60.0.1,fd61::1" }, found);
  assert.match(
    v6?.message ?? "",
    /spec\.cidr fd61::\/64 does not match Logical_Router_Port .* networks fd60::1\/64/,
  );
  // Without other_config:subnet and router ports, the DHCP options still speak.
  const bare = { kind: "found", facts: { ...facts, otherConfigSubnet: undefined, routerPorts: [] } } as const;
  const dhcp = judge({ cidr: "10.60.0.0/24", gateway: "10.60.0.2" }, bare as never);
  assert.match(dhcp?.message ?? "", /DHCP_Options bbbb0000-.* options:router=10\.60\.0\.1/);
  const amb = judge(
    { cidr: "10.60.0.0/24", gateway: "10.60.0.1" },
    { kind: "ambiguous", uuids: ["u1", "u2"] },
  );
  assert.equal(amb?.phase, "Failed");
  assert.equal(amb?.reason, "ExternalSwitchAmbiguous");
  assert.match(amb?.message ?? "", /names 2 logical switches \(u1, u2\); name one of them by its UUID/);
  const ours = judge(
    { cidr: "10.60.0.0/24", gateway: "10.60.0.1" },
    {
      kind: "found",
      facts: { ...facts, ours: true },
    },
  );
  assert.equal(ours?.reason, "ExternalSwitchNotForeign");
  const missing = judge({ cidr: "10.60.0.0/24", gateway: "10.60.0.1" }, { kind: "missing" });
  assert.equal(missing?.reason, "ExternalSwitchNotFound");
});

test("a Subnet bound to one switch whose name now resolves to another is Failed naming both; its own switch stays Ready", () => {
  const bound = "6b1f0000-0000-4000-8000-000000000001";
  const other = "7c2f0000-0000-4000-8000-000000000009";
  const lookup = (uuid: string): ExternalSwitchLookup => ({
    kind: "found",
    facts: { uuid, name: "ZStack 网络 1", ours: false, routerPorts: [], dhcpOptions: [] },
  });
  const judge = (boundSwitch: string | undefined, found: ExternalSwitchLookup) =>
    judgeSubnets(
      [
        {
          ...sn("ext", "1", {
            cidr: "10.60.0.0/24",
            gateway: "10.60.0.1",
            externalLogicalSwitch: "ZStack 网络 1",
          }),
          ...(boundSwitch ? { boundSwitch } : {}),
        },
      ],
      { ...FACTS, externalSwitch: () => found },
    ).get("ext");
  const moved = judge(bound, lookup(other));
  assert.equal(moved?.phase, "Failed");
  assert.equal(moved?.reason, "ExternalSwitchChanged");
  assert.equal(moved?.definition, undefined, "a Failed Subnet serves no new pod");
  assert.ok(moved?.message.includes(bound) && moved.message.includes(other), moved?.message);
  assert.match(moved?.message ?? "", /they are not moved/);
  // Bound to the switch it resolves to, or not bound yet: Ready, bound to what it found.
  for (const b of [bound, undefined]) {
    const ok = judge(b, lookup(bound));
    assert.equal(ok?.ready, true, ok?.message);
    assert.deepEqual(ok?.externalSwitch, { uuid: bound, name: "ZStack 网络 1" });
  }
  // Its switch renamed away and no other taking the name: missing, not changed.
  assert.equal(judge(bound, { kind: "missing" })?.reason, "ExternalSwitchNotFound");
});

test("the status records the switch UUID the Subnet is bound to", () => {
  const v = judgeSubnets([sn("a", "1", { cidr: "10.9.0.0/24", gateway: "10.9.0.1" })], FACTS).get("a");
  assert.ok(v);
  const uuid = "6b1f0000-0000-4000-8000-000000000001";
  const body = statusFor(v, { ports: 0, logicalSwitch: "ZStack 网络 1", logicalSwitchUUID: uuid }, FACTS);
  assert.equal(body.logicalSwitchUUID, uuid);
  assert.equal("logicalSwitchUUID" in statusFor(v, { ports: 0, logicalSwitch: "x" }, FACTS), false);
});

test("a ClusterPath held back makes Ready False with its reason; its transition time stays while its status does", () => {
  const spec = { cidr: "10.8.0.0/24", gateway: "10.8.0.1" };
  const [v] = [...judgeSubnets([sn("flat", "1", spec)], FACTS).values()];
  assert.ok(v);
  const blocked = {
    up: false,
    reason: "ChassisMacMissing",
    message: "node node1 maps physical network flat ...",
  };
  const t0 = new Date("2026-11-27T10:00:00Z");
  const s1 = statusFor(v, { ports: 0, logicalSwitch: "x", clusterPath: blocked }, FACTS, undefined, t0);
  assert.deepEqual(
    s1.conditions.map((c) => [c.type, c.status, c.reason]),
    [
      ["Ready", "False", "ChassisMacMissing"],
      ["ClusterPath", "False", "ChassisMacMissing"],
    ],
  );
  assert.equal(s1.conditions[0]?.message, blocked.message);
  const path1 = s1.conditions[1];
  const s2 = statusFor(
    v,
    { ports: 0, logicalSwitch: "x", clusterPath: { ...blocked, previous: path1 } },
    FACTS,
    s1.conditions[0],
    new Date("2026-11-27T11:00:00Z"),
  );
  assert.equal(s2.conditions[1]?.lastTransitionTime, "2026-11-27T10:00:00Z");
  const up = { up: true, reason: "RouterPortPresent", message: "..." };
  const s3 = statusFor(
    v,
    { ports: 0, logicalSwitch: "x", clusterPath: { ...up, previous: s2.conditions[1] } },
    FACTS,
    s2.conditions[0],
    new Date("2026-11-27T12:00:00Z"),
  );
  assert.deepEqual(
    s3.conditions.map((c) => [c.type, c.status, c.reason, c.lastTransitionTime]),
    [
      ["Ready", "True", "Ready", "2026-11-27T12:00:00Z"],
      ["ClusterPath", "True", "RouterPortPresent", "2026-11-27T12:00:00Z"],
    ],
  );
  assert.equal(statusFor(v, { ports: 0, logicalSwitch: "x" }, FACTS).conditions.length, 1);
});
