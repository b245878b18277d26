import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import {
  type ChassisView,
  chassisMacMissingMessage,
  chassisNode,
  nodesMissingChassisMac,
  parseBridgeMappings,
  parseChassisMacMappings,
} from "./chassis-mac-guard.ts";

const chassis = (
  name: string,
  hostname: string,
  config: Record<string, string>,
  column: "other_config" | "external_ids" = "other_config",
): ChassisView => ({
  name,
  hostname,
  other_config: column === "other_config" ? config : {},
  external_ids: column === "external_ids" ? config : {},
});
const NODES = new Set(["node1", "node2", "node3"]);

describe("parsing the mappings ovn-controller publishes", () => {
  test("reads network:value entries, blanks and empty entries ignored, MACs made canonical", () => {
    assert.deepEqual(
      [...parseChassisMacMappings(" flat:0E:00:00:00:00:01 ,, vlan100:0e-00-00-00-00-02")],
      [
        ["flat", "0e:00:00:00:00:01"],
        ["vlan100", "0e:00:00:00:00:02"],
      ],
    );
    assert.deepEqual([...parseBridgeMappings("flat:br-flat,vlan100:br-vlan")], ["flat", "vlan100"]);
  });

  test("a malformed, multicast or zero MAC, or a network given two MACs, is no MAC for that network", () => {
    const m = parseChassisMacMappings(
      "a:zz:00:00:00:00:01,b:01:00:5e:00:00:01,c:00:00:00:00:00:00,d:0e:00:00:00:00:01,d:0e:00:00:00:00:02,e:0e:00:00:00:00:05,e:0e:00:00:00:00:05,f,:0e:00:00:00:00:06,g:",
    );
    assert.deepEqual([...m], [["e", "0e:00:00:00:00:05"]]);
  });

  test("a bridge mapping entry with a bad bridge still counts as mapping its network; one without a network does not", () => {
    assert.deepEqual([...parseBridgeMappings("flat:bad bridge name that is long,:br-x,nocolon")], ["flat"]);
    assert.deepEqual([...parseBridgeMappings(undefined)], []);
  });

  test("any text: parsing never throws, and every MAC given back is canonical unicast for a network named in the text", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 80 }), (text) => {
        const macs = parseChassisMacMappings(text);
        for (const [network, mac] of macs) {
          assert.match(mac, /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/);
          assert.equal(Number.parseInt(mac.slice(0, 2), 16) & 1, 0);
          assert.ok(text.includes(`${network}:`) || text.includes(`${network} :`));
          assert.ok(parseBridgeMappings(text).has(network), "a network with a MAC is one the text names");
        }
      }),
    );
  });

  test("well-formed mappings round-trip: each network gets exactly its MAC", () => {
    const net = fc.stringMatching(/^[a-z][a-z0-9_-]{0,8}$/);
    const mac = fc
      .array(fc.integer({ min: 0, max: 255 }), { minLength: 6, maxLength: 6 })
      .map(([a, ...rest]) => [((a as number) & 0xfe) | 0x02, ...rest])
      .map((b) => b.map((x) => x.toString(16).padStart(2, "0")).join(":"));
    fc.assert(
      fc.property(fc.uniqueArray(fc.tuple(net, mac), { maxLength: 5, selector: ([n]) => n }), (pairs) => {
        const text = pairs.map(([n, m]) => `${n}:${m}`).join(",");
        assert.deepEqual([...parseChassisMacMappings(text)], pairs);
        assert.deepEqual(
          [...parseBridgeMappings(text)],
          pairs.map(([n]) => n),
        );
      }),
    );
  });
});

describe("which chassis count", () => {
  test("ours: hostname is a node's name and the chassis name ends with it (prefix + node, or the bare node)", () => {
    assert.equal(chassisNode(chassis("k8s-node1", "node1", {}), NODES), "node1");
    assert.equal(chassisNode(chassis("node2", "node2", {}), NODES), "node2");
    // ZStack's hypervisors: hostname is the management IP; a name that is not prefix + hostname; no hostname.
    assert.equal(chassisNode(chassis("3e0c1a9f", "172.20.0.21", {}), NODES), undefined);
    assert.equal(chassisNode(chassis("hv-1", "node1", {}), NODES), undefined);
    assert.equal(chassisNode(chassis("node1", "", {}), NODES), undefined);
    assert.equal(chassisNode(chassis("k8s-node9", "node9", {}), NODES), undefined);
  });

  test("a chassis of ours mapping the network without a MAC blocks, named once, sorted; ZStack's and unrelated ones never", () => {
    const rows = [
      chassis("k8s-node2", "node2", { "ovn-bridge-mappings": "flat:br-flat" }),
      chassis("k8s-node1", "node1", {
        "ovn-bridge-mappings": "flat:br-flat,vlan:br-vlan",
        "ovn-chassis-mac-mappings": "vlan:0e:00:00:00:00:01",
      }),
      // ZStack's hypervisor maps flat without a chassis MAC: ZStack's business, not ours.
      chassis("zstack-hv1", "172.20.0.21", { "ovn-bridge-mappings": "flat:br-eth0" }),
      // Ours, mapping only another network.
      chassis("k8s-node3", "node3", { "ovn-bridge-mappings": "other:br-other" }),
    ];
    assert.deepEqual(
      [...nodesMissingChassisMac(rows, NODES, ["flat", "vlan"])],
      [["flat", ["node1", "node2"]]],
    );
    assert.deepEqual([...nodesMissingChassisMac(rows, NODES, ["vlan"])], []);
    assert.deepEqual([...nodesMissingChassisMac(rows, NODES, [])], []);
  });

  test("a stale chassis row of a node (another prefix, never unregistered) does not block while its live row has the MAC", () => {
    const live = chassis("k8s-node1", "node1", {
      "ovn-bridge-mappings": "flat:br-flat",
      "ovn-chassis-mac-mappings": "flat:0e:00:00:00:00:01",
    });
    const stale = chassis("old-node1", "node1", { "ovn-bridge-mappings": "flat:br-flat" });
    assert.deepEqual([...nodesMissingChassisMac([stale, live], NODES, ["flat"])], []);
    assert.deepEqual([...nodesMissingChassisMac([live, stale], NODES, ["flat"])], []);
    // Without the live row the stale one still counts: the node maps the network and has no MAC for it.
    assert.deepEqual([...nodesMissingChassisMac([stale], NODES, ["flat"])], [["flat", ["node1"]]]);
  });

  test("older OVN: the mappings in external_ids count when other_config lacks them", () => {
    const rows = [
      chassis("k8s-node1", "node1", { "ovn-bridge-mappings": "flat:br-flat" }, "external_ids"),
      chassis(
        "k8s-node2",
        "node2",
        { "ovn-bridge-mappings": "flat:br-flat", "ovn-chassis-mac-mappings": "flat:0e:00:00:00:00:02" },
        "external_ids",
      ),
    ];
    assert.deepEqual([...nodesMissingChassisMac(rows, NODES, ["flat"])], [["flat", ["node1"]]]);
  });

  test("property: the result is exactly the nodes whose chassis rows of ours map a wanted network and none of which has a valid MAC for it", () => {
    const networks = ["flat", "vlan", "other"];
    const row = fc.record({
      node: fc.constantFrom("node1", "node2", "node3", "172.20.0.21"),
      prefix: fc.constantFrom("k8s-", "", "hv-"),
      maps: fc.subarray(networks),
      macs: fc.subarray(networks),
      badMac: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(row, { maxLength: 6 }), fc.subarray(networks), (rows, wanted) => {
        const views = rows.map((r, i) =>
          chassis(r.prefix === "hv-" ? `hv-${i}` : `${r.prefix}${r.node}`, r.node, {
            "ovn-bridge-mappings": r.maps.map((n) => `${n}:br-${n}`).join(","),
            "ovn-chassis-mac-mappings": r.macs
              .map((n) => `${n}:${r.badMac ? "zz:zz" : `0e:00:00:00:00:0${i}`}`)
              .join(","),
          }),
        );
        const expected = new Map<string, Set<string>>();
        const ours = rows.filter((r) => r.prefix !== "hv-" && NODES.has(r.node));
        for (const r of ours) {
          for (const n of r.maps) {
            const hasMac = ours.some((o) => o.node === r.node && !o.badMac && o.macs.includes(n));
            if (wanted.includes(n) && !hasMac) expected.set(n, (expected.get(n) ?? new Set()).add(r.node));
          }
        }
        const got = nodesMissingChassisMac(views, NODES, wanted);
        assert.deepEqual(
          Object.fromEntries(got),
          Object.fromEntries([...expected].map(([n, s]) => [n, [...s].sort()])),
        );
      }),
    );
  });
});

test("the message names the switch, each network with its nodes, and the fix", () => {
  const m = chassisMacMissingMessage(
    "l2-flat",
    new Map([
      ["flat", ["node1"]],
      ["vlan", Array.from({ length: 12 }, (_, i) => `n${i}`)],
    ]),
  );
  assert.match(m, /no cluster router port on l2-flat/);
  assert.match(m, /node node1 maps physical network flat without a chassis MAC/);
  assert.match(m, /nodes n0, .*n9 and 2 more map physical network vlan/);
  assert.match(m, /roll out the zstack-ovnkube-node DaemonSet/);
  assert.match(m, /own ovn-bridge-mappings/);
});
