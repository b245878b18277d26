import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { parseIp } from "../ipam/address.ts";
import { overlaps, parseCidr } from "../ipam/cidr.ts";
import {
  EXTERNAL_LOCALNET_ROUTER_GUARD_PRIORITY,
  EXTERNAL_LOCALNET_STATELESS_PRIORITY,
  EXTERNAL_SOURCE_GUARD_PRIORITY,
  externalLocalnetGroupId,
  externalLocalnetGroupName,
  externalPodRoutes,
  externalRouterPortName,
  externalRouterPortRows,
  externalSwitchPortName,
  localnetStatelessRows,
  onLink,
  supportsStatelessAcl,
} from "./external-router-port.ts";
import { CONTROLLER, ID_KEY, OWNER_KEY } from "./ownership.ts";
import { parsePodNetwork, podNetworksAnnotation } from "./pod-port.ts";
import {
  EGRESS_POLICY_PRIORITY,
  EXTERNAL_PODS_POLICY_PRIORITY,
  INSIDE_ADDRESS_SET_V4,
  subnetScope,
} from "./topology.ts";

const TARGETS = {
  joinCIDR: "100.64.0.0/16",
  clusterCIDRs: ["10.244.0.0/16"],
  serviceCIDRs: ["10.96.0.0/16"],
};

describe("our router port on ZStack's switch", () => {
  test("a router port on the cluster router and its router-type peer joined to ZStack's switch by UUID, both ours", () => {
    const rows = externalRouterPortRows({
      subnet: "zs",
      switchUuid: "6b1f0000-0000-4000-8000-000000000001",
      networks: ["10.60.0.2/24", "fd60::2/64"],
    });
    assert.equal(rows.length, 5);
    const [lrp, lsp, allow4, guard4, guard6] = rows;
    assert.equal(lrp?.table, "Logical_Router_Port");
    assert.equal(lrp?.row.name, externalRouterPortName("zs"));
    assert.deepEqual(lrp?.row.networks, ["10.60.0.2/24", "fd60::2/64"]);
    assert.equal(lrp?.row.mac, "0a:58:0a:3c:00:02");
    assert.deepEqual(lrp?.parent, { table: "Logical_Router", id: "cluster-router", column: "ports" });
    assert.equal(lsp?.table, "Logical_Switch_Port");
    assert.equal(lsp?.row.name, externalSwitchPortName("zs"));
    assert.equal(lsp?.row.type, "router");
    assert.deepEqual(lsp?.row.options, { "router-port": externalRouterPortName("zs") });
    assert.deepEqual(lsp?.parent, {
      table: "Logical_Switch",
      uuid: "6b1f0000-0000-4000-8000-000000000001",
      column: "ports",
    });
    for (const r of rows) {
      const ids = r.row.external_ids as Record<string, string>;
      assert.equal(ids["zstack.io/owner"], "zstack-ovnkube-controller");
      assert.equal(ids["zstack.io/id"], r.id);
      // The Subnet's scope removes them with it (and only them: pod ports are not in it).
      assert.ok(subnetScope("zs").owns(r.id, r.row as never), r.id);
      assert.ok(!subnetScope("zs2").owns(r.id, r.row as never), r.id);
    }
    const ids = lsp?.row.external_ids as Record<string, string>;
    assert.equal(ids["zstack.io/ip/10.60.0.2"], "zs");
    assert.equal(ids["zstack.io/ip/fd60::2"], "zs");
    // What else enters through the port is dropped before routing: only our pods of the Subnet come through it.
    // IPv4: our pods' addresses allowed just above a drop of everything else (no negated address set).
    const policies = [allow4, guard4, guard6].map((g) => [
      g?.table,
      g?.id,
      g?.row.priority,
      g?.row.action,
      g?.row.match,
      g?.parent,
    ]);
    const parent = { table: "Logical_Router", id: "cluster-router", column: "policies" };
    assert.deepEqual(policies, [
      [
        "Logical_Router_Policy",
        "subnet/zs/ext-guard-v4-allow",
        EXTERNAL_SOURCE_GUARD_PRIORITY + 1,
        "allow",
        'inport == "zovn-rtoe-zs" && ip4.src == $zovn_external_pods_v4 && ip4.src == 10.60.0.0/24',
        parent,
      ],
      [
        "Logical_Router_Policy",
        "subnet/zs/ext-guard-v4",
        EXTERNAL_SOURCE_GUARD_PRIORITY,
        "drop",
        'inport == "zovn-rtoe-zs" && ip4',
        parent,
      ],
      [
        "Logical_Router_Policy",
        "subnet/zs/ext-guard-v6",
        EXTERNAL_SOURCE_GUARD_PRIORITY,
        "drop",
        'inport == "zovn-rtoe-zs" && ip6 && !(ip6.src == fd60::/64)',
        parent,
      ],
    ]);
    for (const m of policies.map((p) => String(p[4]))) assert.doesNotMatch(m, /!\(.*\$/, "no negated set");
    assert.ok(EXTERNAL_SOURCE_GUARD_PRIORITY > EXTERNAL_PODS_POLICY_PRIORITY);
    assert.ok(EXTERNAL_SOURCE_GUARD_PRIORITY > EGRESS_POLICY_PRIORITY);
  });

  test("an IPv6-only router port gets the same MAC every time", () => {
    const a = externalRouterPortRows({ subnet: "v6", switchUuid: "u", networks: ["fd60::2/64"] });
    const b = externalRouterPortRows({ subnet: "v6", switchUuid: "u", networks: ["fd60::2/64"] });
    assert.equal(a[0]?.row.mac, b[0]?.row.mac);
    assert.match(String(a[0]?.row.mac), /^0a:58(:[0-9a-f]{2}){4}$/);
  });
});

describe("the localnet port of ZStack's flat/VLAN switch", () => {
  const LN = ["0b1f0000-0000-4000-8000-00000000000b", "0a1f0000-0000-4000-8000-00000000000a"];

  test("a switch without a localnet port gets no group", () => {
    assert.deepEqual(localnetStatelessRows("zs", [], ["10.60.0.2/24"]), []);
  });

  test("a group of ours holding the localnet ports, every IP packet stateless across them, the wire kept off our router port", () => {
    const rows = localnetStatelessRows("zs-flat", [...LN, LN[0] as string], ["10.60.0.2/24", "fd60::2/64"]);
    assert.equal(rows.length, 4);
    const [pg, from, to, guard] = rows;
    const name = externalLocalnetGroupName("zs-flat");
    assert.match(name, /^zovn_ln_[0-9a-f]{16}$/, "an identifier for @name in a match");
    assert.notEqual(name, externalLocalnetGroupName("zs-flat2"));
    assert.equal(pg?.table, "Port_Group");
    assert.equal(pg?.id, externalLocalnetGroupId("zs-flat"));
    assert.equal(pg?.row.name, name);
    // Our own row's column, written whole (each port once, in a stable order): a port that is no longer a
    // localnet port of the switch is taken out by the next update.
    assert.deepEqual(pg?.row.ports, [...LN].sort());
    assert.equal(pg?.links, undefined);
    for (const [acl, dir, side] of [
      [from, "from-lport", "inport"],
      [to, "to-lport", "outport"],
    ] as const) {
      assert.equal(acl?.table, "ACL");
      assert.deepEqual(acl?.parent, { table: "Port_Group", id: pg?.id, column: "acls" });
      assert.equal(acl?.row.direction, dir);
      assert.equal(acl?.row.action, "allow-stateless");
      assert.equal(acl?.row.priority, EXTERNAL_LOCALNET_STATELESS_PRIORITY);
      assert.equal(acl?.row.match, `${side} == @${name} && ip`);
    }
    assert.equal(guard?.table, "ACL");
    assert.deepEqual(guard?.parent, { table: "Port_Group", id: pg?.id, column: "acls" });
    assert.equal(guard?.row.direction, "from-lport");
    assert.equal(guard?.row.action, "drop");
    assert.equal(guard?.row.priority, EXTERNAL_LOCALNET_ROUTER_GUARD_PRIORITY);
    assert.equal(
      guard?.row.match,
      `inport == @${name} && ((arp.op == 1 && arp.tpa == 10.60.0.2) || (arp.spa == 10.60.0.2 && arp.sha != 0a:58:0a:3c:00:02) || (nd_ns && nd.target == fd60::2) || (nd_na && nd.target == fd60::2 && nd.tll != 0a:58:0a:3c:00:02) || (ip && eth.dst == 0a:58:0a:3c:00:02))`,
    );
    // The router port's own MAC (the one the guard names) is the row's.
    const lrp = externalRouterPortRows({
      subnet: "zs-flat",
      switchUuid: "u",
      networks: ["10.60.0.2/24", "fd60::2/64"],
    })[0];
    assert.equal(lrp?.row.mac, "0a:58:0a:3c:00:02");
    // Every row ours, under the Subnet's ids (its scope removes them with it), each with its own chosen UUID, the
    // same on every call (a retried insert after a lost reply is refused by the server, not duplicated).
    const scope = subnetScope("zs-flat");
    const again = localnetStatelessRows("zs-flat", LN, ["10.60.0.2/24", "fd60::2/64"]);
    const uuids = new Set<string>();
    for (const [i, r] of rows.entries()) {
      const ids = r.row.external_ids as Record<string, string>;
      assert.equal(ids[OWNER_KEY], CONTROLLER);
      assert.equal(ids[ID_KEY], r.id);
      assert.ok(scope.tables.includes(r.table), r.table);
      assert.ok(scope.owns(r.id, r.row as never), r.id);
      assert.match(String(r.uuid), /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
      assert.equal(r.uuid, again[i]?.uuid);
      uuids.add(String(r.uuid));
    }
    assert.equal(uuids.size, rows.length);
    assert.notEqual(localnetStatelessRows("zs-flat2", LN, ["10.60.0.2/24"])[0]?.uuid, pg?.uuid);
    assert.equal(
      EXTERNAL_LOCALNET_STATELESS_PRIORITY,
      0,
      "any ACL of ZStack's on the same packets outranks ours",
    );
  });

  test("a router port with one family: the guard names only that family", () => {
    const rows = localnetStatelessRows("v4", LN, ["10.61.0.9/24"]);
    assert.equal(
      rows[3]?.row.match,
      `inport == @${externalLocalnetGroupName("v4")} && ((arp.op == 1 && arp.tpa == 10.61.0.9) || (arp.spa == 10.61.0.9 && arp.sha != 0a:58:0a:3d:00:09) || (ip && eth.dst == 0a:58:0a:3d:00:09))`,
    );
    const v6 = localnetStatelessRows("v6", LN, ["fd60::2/64"]);
    assert.match(
      String(v6[3]?.row.match),
      /^inport == @zovn_ln_[0-9a-f]{16} && \(\(nd_ns && nd\.target == fd60::2\) \|\| \(nd_na && nd\.target == fd60::2 && nd\.tll != 0a:58(:[0-9a-f]{2}){4}\) \|\| \(ip && eth\.dst == 0a:58(:[0-9a-f]{2}){4}\)\)$/,
    );
  });

  test("a switch with load balancers of ZStack's: only the cluster's own sources skip conntrack (IPv6 CIDRs literally, canonical, once)", () => {
    const rows = localnetStatelessRows("d", LN, ["10.60.0.2/24"], {
      onlyInside6: ["100.64.0.0/16", "fd00:10:244::/48", "FD00:10:244::/48", "fd98::/108"],
    });
    const name = externalLocalnetGroupName("d");
    const source = `(ip4.src == $${INSIDE_ADDRESS_SET_V4} || ip6.src == {fd00:10:244::/48, fd98::/108})`;
    assert.equal(rows[1]?.row.match, `inport == @${name} && ${source}`);
    assert.equal(rows[2]?.row.match, `outport == @${name} && ${source}`);
    const v4only = localnetStatelessRows("d", LN, ["10.60.0.2/24"], { onlyInside6: ["100.64.0.0/16"] });
    assert.equal(v4only[1]?.row.match, `inport == @${name} && ip4.src == $${INSIDE_ADDRESS_SET_V4}`);
    // The router guard is the same either way.
    assert.equal(rows[3]?.row.match, localnetStatelessRows("d", LN, ["10.60.0.2/24"])[3]?.row.match);
  });

  test("written only when the NB server's schema has the ACL action allow-stateless", () => {
    const schema = (actions: string[] | undefined) => ({
      tables: new Map([
        ["ACL", { columns: new Map([["action", { type: { key: actions ? { enum: actions } : {} } }]]) }],
      ]),
    });
    assert.equal(supportsStatelessAcl(schema(["allow", "allow-related", "allow-stateless", "drop"])), true);
    assert.equal(supportsStatelessAcl(schema(["allow", "allow-related", "drop", "reject"])), false);
    assert.equal(supportsStatelessAcl(schema(undefined)), false);
    assert.equal(supportsStatelessAcl({ tables: new Map() }), false);
  });
});

describe("routes of a pod on ZStack's switch", () => {
  test("join, cluster and service CIDRs via our router port, per family, each once", () => {
    assert.deepEqual(externalPodRoutes(["10.60.0.2"], ["10.60.0.0/24"], TARGETS), [
      { dest: "100.64.0.0/16", nextHop: "10.60.0.2" },
      { dest: "10.244.0.0/16", nextHop: "10.60.0.2" },
      { dest: "10.96.0.0/16", nextHop: "10.60.0.2" },
    ]);
    assert.deepEqual(
      externalPodRoutes(["10.60.0.2", "fd60::2"], ["10.60.0.0/24", "fd60::/64"], {
        joinCIDR: "100.64.0.0/16",
        clusterCIDRs: ["10.244.0.0/16", "fd00:10:244::/56", "10.244.0.0/16"],
        serviceCIDRs: ["10.96.0.0/16", "fd98::/108"],
      }),
      [
        { dest: "100.64.0.0/16", nextHop: "10.60.0.2" },
        { dest: "10.244.0.0/16", nextHop: "10.60.0.2" },
        { dest: "fd00:10:244::/56", nextHop: "fd60::2" },
        { dest: "10.96.0.0/16", nextHop: "10.60.0.2" },
        { dest: "fd98::/108", nextHop: "fd60::2" },
      ],
    );
    // No IPv6 address on the router port: no IPv6 route.
    assert.deepEqual(
      externalPodRoutes(["10.60.0.2"], ["10.60.0.0/24"], { ...TARGETS, serviceCIDRs: ["fd98::/108"] }).map(
        (r) => r.dest,
      ),
      ["100.64.0.0/16", "10.244.0.0/16"],
    );
  });

  test("a cluster network overlapping the pod's own is left out (the on-link route stays)", () => {
    assert.deepEqual(
      externalPodRoutes(["10.244.7.2"], ["10.244.7.0/24"], TARGETS).map((r) => r.dest),
      ["100.64.0.0/16", "10.96.0.0/16"],
    );
  });

  test("the routes, in an annotation, are accepted by the node agent's parser; none overlaps the pod's network", () => {
    const octet = fc.nat(255);
    const cidr4 = fc.tuple(octet, octet, fc.integer({ min: 8, max: 24 })).map(([a, b, p]) => {
      const c = parseCidr(`${a}.${b}.0.0/16`);
      const mask = ((1n << 32n) - 1n) ^ ((1n << BigInt(32 - p)) - 1n);
      const net = c.network & mask;
      return `${Number(net >> 24n)}.${Number((net >> 16n) & 255n)}.${Number((net >> 8n) & 255n)}.0/${p}`;
    });
    fc.assert(
      fc.property(fc.array(cidr4, { minLength: 1, maxLength: 3 }), cidr4, cidr4, (cluster, service, join) => {
        const own = "10.60.0.0/24";
        const routes = externalPodRoutes(["10.60.0.2"], [own], {
          joinCIDR: join,
          clusterCIDRs: cluster,
          serviceCIDRs: [service],
        });
        for (const r of routes) {
          assert.ok(!overlaps(r.dest, own), r.dest);
          assert.ok(onLink(parseIp(r.nextHop), ["10.60.0.2/24"]));
        }
        assert.equal(new Set(routes.map((r) => r.dest)).size, routes.length);
        const text = podNetworksAnnotation({
          subnet: "zs",
          logicalSwitch: "6b1f0000-0000-4000-8000-000000000001",
          mac: "0a:58:0a:3c:00:05",
          ipsWithPrefix: ["10.60.0.5/24"],
          gateways: ["10.60.0.1"],
          routes,
        });
        assert.equal(parsePodNetwork(text)?.routes.length, routes.length);
      }),
      { numRuns: 500 },
    );
  });
});
