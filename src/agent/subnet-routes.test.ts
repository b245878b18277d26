import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { newSubnet, SUBNET_READY, type Subnet } from "../api/subnet.ts";
import { parseIp } from "../ipam/address.ts";
import { cidrContains, formatCidr, overlaps, parseCidr } from "../ipam/cidr.ts";
import { specialRangeOverlapping } from "../ipam/special-ranges.ts";
import { mgmtRouteCidrs, planSubnetRoutes, type RouteGuard, routeInputs } from "./subnet-routes.ts";

const GUARD: RouteGuard = {
  joinCidr: parseCidr("100.64.0.0/16"),
  serviceCidrs: [parseCidr("10.96.0.0/16")],
  nodeIps: [parseIp("192.168.250.1")],
};

function subnet(
  name: string,
  cidr: string,
  ready: "True" | "False" | "Unknown" | undefined,
  stale = false,
): Subnet {
  const s = newSubnet(name, { cidr, gateway: "" });
  s.metadata.generation = 2;
  if (ready)
    s.status = {
      conditions: [
        {
          type: SUBNET_READY,
          status: ready,
          observedGeneration: stale ? 1 : 2,
          lastTransitionTime: "2026-01-01T00:00:00Z",
          reason: "x",
          message: "",
        },
      ],
    };
  return s;
}

const routed = (subnets: Subnet[]) => planSubnetRoutes(subnets, GUARD).cidrs.map(formatCidr);

describe("Subnet routes through the management port", () => {
  test("one route per CIDR of each Subnet the controller accepted for its current spec", () => {
    assert.deepEqual(
      routed([
        subnet("blue", "10.250.0.0/24", "True"),
        subnet("dual", "10.251.0.0/24,fd00:251::/64", "True"),
        subnet("pending", "10.252.0.0/24", undefined),
        subnet("failed", "10.253.0.0/24", "False"),
        subnet("unknown", "10.254.0.0/24", "Unknown"),
        // Ready for generation 1, but the spec changed since: the new CIDR is not accepted yet.
        subnet("edited", "10.255.0.0/24", "True", true),
      ]),
      ["10.250.0.0/24", "10.251.0.0/24", "fd00:251::/64"],
    );
  });

  test("a provider network Subnet gets no route through the management port: its pods are on the underlay", () => {
    const vlan = subnet("vlan", "172.30.100.0/24", "True");
    vlan.spec = { ...vlan.spec, vlanID: 100, provider: "physnet1" };
    assert.deepEqual(routed([vlan, subnet("blue", "10.250.0.0/24", "True")]), ["10.250.0.0/24"]);
    assert.notEqual(routeInputs(vlan), routeInputs(subnet("vlan", "172.30.100.0/24", "True")));
  });

  test("a hostile CIDR never becomes a route, even when marked Ready, and the reason names it", () => {
    const cases: [string, RegExp][] = [
      ["0.0.0.0/0", /wider than \/8/],
      ["100.64.0.0/24", /join network/],
      ["10.96.0.0/12", /service network/],
      ["192.168.250.0/24", /node's own address 192\.168\.250\.1/],
      ["10.250.0.0/24 via 1.2.3.4", /spec\.cidr/],
      ["10.250.0.5/24", /host bits/],
      ["169.254.169.0/24", /link-local range.*169\.254\.0\.0\/16/],
      ["224.0.0.0/8", /multicast range 224\.0\.0\.0\/4/],
      ["127.0.0.0/8", /loopback range 127\.0\.0\.0\/8/],
      ["0.0.0.0/8", /'this network' range/],
      ["240.0.0.0/8", /reserved and broadcast/],
      ["fe80::/64", /IPv6 link-local range/],
      ["ff02::/64", /IPv6 multicast range/],
      ["::1/128", /IPv6 loopback/],
    ];
    for (const [cidr, why] of cases) {
      const plan = planSubnetRoutes([subnet("evil", cidr, "True")], GUARD);
      assert.deepEqual(plan.cidrs, [], cidr);
      assert.match(plan.refused[0]?.reason ?? "", why, cidr);
    }
  });

  test("a Subnet on the node's uplink network, or holding the API server or a default gateway, is refused", () => {
    // Nodes at 192.168.1.10 and up, the LAN gateway at .1, an API-server VIP at 172.16.0.100.
    const guard: RouteGuard = {
      ...GUARD,
      nodeIps: [parseIp("192.168.1.10")],
      uplinkCidrs: [parseCidr("192.168.1.0/24")],
      hostIps: [
        { ip: parseIp("172.16.0.100"), what: "the API server's address" },
        { ip: parseIp("192.168.1.1"), what: "the node's default gateway" },
        { ip: parseIp("10.20.0.1"), what: "the node's default gateway" },
      ],
    };
    const cases: [string, RegExp][] = [
      ["192.168.1.0/29", /uplink network 192\.168\.1\.0\/24/],
      ["192.168.0.0/16", /node's own address 192\.168\.1\.10/],
      ["172.16.0.0/12", /API server's address 172\.16\.0\.100/],
      ["10.20.0.0/24", /default gateway 10\.20\.0\.1/],
    ];
    for (const [cidr, why] of cases) {
      const plan = planSubnetRoutes([subnet("evil", cidr, "True")], guard);
      assert.deepEqual(plan.cidrs, [], cidr);
      assert.match(plan.refused[0]?.reason ?? "", why, cidr);
    }
    assert.deepEqual(
      planSubnetRoutes([subnet("fine", "172.32.0.0/16", "True")], guard).cidrs.map(formatCidr),
      ["172.32.0.0/16"],
    );
  });

  test("two Subnets claiming overlapping CIDRs are both left out; the others are routed", () => {
    const plan = planSubnetRoutes(
      [
        subnet("a", "10.250.0.0/16", "True"),
        subnet("b", "10.250.3.0/24", "True"),
        subnet("c", "10.251.0.0/24", "True"),
      ],
      GUARD,
    );
    assert.deepEqual(plan.cidrs.map(formatCidr), ["10.251.0.0/24"]);
    assert.deepEqual(plan.refused.map((r) => r.subnet).sort(), ["a", "b"]);
  });

  test("the routed set never overlaps the join or service network nor holds a node address, whatever the Subnets", () => {
    const block = (v: number, p: number) => {
      const net = p === 0 ? 0 : (v >>> (32 - p)) << (32 - p);
      return `${net >>> 24}.${(net >>> 16) & 255}.${(net >>> 8) & 255}.${net & 255}/${p}`;
    };
    const nodeIp = Number(GUARD.nodeIps[0]?.value);
    // Random blocks rarely hold the node's address, so blocks around it are drawn as often.
    const cidr = fc.oneof(
      fc
        .tuple(fc.integer({ min: 0, max: 0xffffffff }), fc.integer({ min: 0, max: 32 }))
        .map(([v, p]) => block(v, p)),
      fc.integer({ min: 0, max: 32 }).map((p) => block(nodeIp, p)),
    );
    fc.assert(
      fc.property(fc.array(fc.tuple(cidr, fc.boolean()), { maxLength: 6 }), (items) => {
        const plan = planSubnetRoutes(
          items.map(([c, ready], i) => subnet(`s${i}`, c, ready ? "True" : "False")),
          GUARD,
        );
        for (const c of plan.cidrs) {
          assert.ok(!overlaps(c, GUARD.joinCidr));
          assert.ok(!GUARD.serviceCidrs.some((s) => overlaps(c, s)));
          assert.ok(c.prefix >= 8);
          assert.ok(!GUARD.nodeIps.some((ip) => cidrContains(c, ip)), formatCidr(c));
          assert.equal(specialRangeOverlapping(c), undefined, formatCidr(c));
        }
        for (const [i, a] of plan.cidrs.entries())
          for (const b of plan.cidrs.slice(i + 1))
            assert.ok(!overlaps(a, b), `${formatCidr(a)} ${formatCidr(b)}`);
      }),
    );
  });

  test("the Subnets left out for overlapping are exactly those sharing an address with another Subnet", () => {
    const block = fc
      .tuple(fc.integer({ min: 0, max: 0xffff }), fc.integer({ min: 12, max: 28 }))
      .map(([v, p]) => {
        // Inside 10.0.0.0/8, clear of this test's guard, and blocks of few sizes so they often nest.
        const net = ((0x0a000000 | (v << 8)) >>> (32 - p)) << (32 - p);
        return `${net >>> 24}.${(net >>> 16) & 255}.${(net >>> 8) & 255}.${net & 255}/${p}`;
      });
    const subnets = fc.array(fc.array(block, { minLength: 1, maxLength: 2 }), { maxLength: 12 });
    fc.assert(
      fc.property(subnets, (specs) => {
        const plan = planSubnetRoutes(
          specs.map((cidrs, i) => subnet(`s${i}`, cidrs.join(","), "True")),
          { ...GUARD, serviceCidrs: [parseCidr("172.30.0.0/16")] },
        );
        // The definition, pair by pair.
        const expected = new Set<string>();
        for (const [i, a] of specs.entries())
          for (const [j, b] of specs.entries())
            if (i !== j && a.some((x) => b.some((y) => overlaps(x, y)))) expected.add(`s${i}`);
        const refusedForOverlap = plan.refused.filter((r) => /overlaps Subnet/.test(r.reason));
        assert.deepEqual(new Set(refusedForOverlap.map((r) => r.subnet)), expected);
        assert.equal(refusedForOverlap.length, expected.size, "each Subnet is reported once");
        const routed = new Set(plan.cidrs.map(formatCidr));
        for (const [i, cidrs] of specs.entries())
          for (const c of cidrs) assert.equal(routed.has(c), !expected.has(`s${i}`), `s${i} ${c}`);
      }),
      { numRuns: 500 },
    );
  });

  test("thousands of Subnets are planned, each disjoint one routed and each overlapping pair left out", () => {
    const many: Subnet[] = [];
    for (let i = 0; i < 3000; i++) many.push(subnet(`s${i}`, `10.${i >> 8}.${i & 255}.0/24`, "True"));
    many.push(subnet("wide", "10.5.0.0/16", "True"));
    const plan = planSubnetRoutes(many, GUARD);
    assert.equal(plan.cidrs.length, 3000 - 256);
    assert.equal(plan.refused.length, 257);
    assert.match(
      plan.refused.find((r) => r.subnet === "wide")?.reason ?? "",
      /overlaps Subnet s1280's 10\.5\.0\.0\/24/,
    );
  });

  test("only a change of a Subnet's CIDRs or of its acceptance changes its route inputs", () => {
    const base = subnet("a", "10.250.0.0/24", "True");
    const statusOnly: Subnet = {
      ...base,
      status: {
        ...base.status,
        conditions: (base.status?.conditions ?? []).map((c) => ({ ...c, message: "12 addresses in use" })),
      },
    };
    assert.equal(routeInputs(statusOnly), routeInputs(base));
    assert.notEqual(routeInputs(subnet("a", "10.250.1.0/24", "True")), routeInputs(base));
    assert.notEqual(routeInputs(subnet("a", "10.250.0.0/24", "False")), routeInputs(base));
    assert.notEqual(routeInputs(subnet("a", "10.250.0.0/24", "True", true)), routeInputs(base));
  });

  test("the management routes hold the cluster and service CIDRs and each Subnet prefix once", () => {
    const base = [parseCidr("10.244.0.0/16"), parseCidr("10.96.0.0/16")];
    assert.deepEqual(
      mgmtRouteCidrs(base, [parseCidr("10.244.0.0/16"), parseCidr("10.250.0.0/24")]).map(formatCidr),
      ["10.244.0.0/16", "10.96.0.0/16", "10.250.0.0/24"],
    );
  });
});
