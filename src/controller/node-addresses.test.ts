import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { formatIp, ipFromValue } from "../ipam/address.ts";
import { cidrContains, parseCidr } from "../ipam/cidr.ts";
import { NODE_REPLY_IPS_MAX } from "../ovn/topology.ts";
import { type NodeAddressesLite, nodeReplyAddresses } from "./node-addresses.ts";

const INSIDE = ["10.244.0.0/16", "10.96.0.0/16", "100.64.0.0/16"].map((c) => parseCidr(c));
const node = (name: string, ...addresses: [string, string][]): NodeAddressesLite => ({
  name,
  addresses: addresses.map(([type, address]) => ({ type, address })),
});
const internal = (name: string, ...ips: string[]) =>
  node(name, ...ips.map((a) => ["InternalIP", a] as [string, string]));
const accepted = (name: string, nodes: NodeAddressesLite[]) =>
  nodeReplyAddresses(name, nodes, INSIDE).accepted.map(formatIp);

describe("node reply addresses", () => {
  test("a node's own IPv4 InternalIPs are accepted, sorted and once each; other address types are not looked at", () => {
    const n1 = node(
      "n1",
      ["Hostname", "n1"],
      ["InternalIP", "192.168.200.21"],
      ["ExternalIP", "203.0.113.5"],
      ["InternalIP", "192.168.200.11"],
      ["InternalIP", "192.168.200.11"],
    );
    const got = nodeReplyAddresses("n1", [n1, internal("n2", "192.168.200.12")], INSIDE);
    assert.deepEqual(got.accepted.map(formatIp), ["192.168.200.11", "192.168.200.21"]);
    assert.deepEqual(got.refused, []);
  });

  test("IPv6 InternalIPs are neither accepted nor refused (no IPv6 reroute)", () => {
    const got = nodeReplyAddresses("n1", [internal("n1", "fd00:200::11", "192.168.200.11")], INSIDE);
    assert.deepEqual(got.accepted.map(formatIp), ["192.168.200.11"]);
    assert.deepEqual(got.refused, []);
  });

  test("each refused address names its field and why", () => {
    const n1 = internal(
      "n1",
      "192.168.200.11",
      "not-an-ip",
      "10.244.3.4",
      "10.96.0.1",
      "100.64.0.2",
      "127.0.0.1",
      "169.254.1.1",
      "224.0.0.5",
      "0.0.0.0",
      "255.255.255.255",
      "192.168.200.12",
      "192.168.200.11/24",
      " 192.168.200.13",
    );
    const got = nodeReplyAddresses("n1", [n1, internal("n2", "192.168.200.12")], INSIDE);
    assert.deepEqual(got.accepted.map(formatIp), ["192.168.200.11"]);
    assert.deepEqual(
      got.refused.map((r) => `${r.field} ${r.address}: ${r.reason}`),
      [
        "status.addresses[1] not-an-ip: is not an IP address",
        "status.addresses[2] 10.244.3.4: is inside 10.244.0.0/16, a range the cluster routes itself (pods, Services, join network)",
        "status.addresses[3] 10.96.0.1: is inside 10.96.0.0/16, a range the cluster routes itself (pods, Services, join network)",
        "status.addresses[4] 100.64.0.2: is inside 100.64.0.0/16, a range the cluster routes itself (pods, Services, join network)",
        "status.addresses[5] 127.0.0.1: is a loopback address",
        "status.addresses[6] 169.254.1.1: is a link-local address",
        "status.addresses[7] 224.0.0.5: is a multicast address",
        "status.addresses[8] 0.0.0.0: is an unspecified (0.0.0.0/8) address",
        "status.addresses[9] 255.255.255.255: is a reserved (240.0.0.0/4) address",
        "status.addresses[10] 192.168.200.12: is also another Node's InternalIP",
        "status.addresses[11] 192.168.200.11/24: is not an IP address",
        "status.addresses[12]  192.168.200.13: is not an IP address",
      ],
    );
  });

  test("a Node with more than 16 InternalIPs gets the first 16 in address order; each other one is refused with its field", () => {
    // Listed in reverse: the cut follows address order, not the Node's order.
    const texts = Array.from({ length: 20 }, (_, i) => `192.168.200.${40 - i}`);
    const got = nodeReplyAddresses("n1", [internal("n1", ...texts)], INSIDE);
    assert.equal(NODE_REPLY_IPS_MAX, 16);
    assert.deepEqual(
      got.accepted.map(formatIp),
      Array.from({ length: 16 }, (_, i) => `192.168.200.${21 + i}`),
    );
    assert.deepEqual(
      got.refused.map((r) => `${r.field} ${r.address}`),
      [
        "status.addresses[3] 192.168.200.37",
        "status.addresses[2] 192.168.200.38",
        "status.addresses[1] 192.168.200.39",
        "status.addresses[0] 192.168.200.40",
      ],
    );
    for (const r of got.refused) assert.match(r.reason, /beyond the first 16 InternalIPs/);
    // Refused addresses do not count towards the cap.
    const mixed = nodeReplyAddresses("n1", [internal("n1", "10.244.0.9", ...texts.slice(0, 16))], INSIDE);
    assert.equal(mixed.accepted.length, 16);
    assert.equal(mixed.refused.length, 1);
  });

  test("an address two Nodes claim is refused for both; the other node keeps its own", () => {
    const nodes = [internal("n1", "192.168.200.11"), internal("n2", "192.168.200.12", "192.168.200.11")];
    assert.deepEqual(accepted("n1", nodes), []);
    assert.deepEqual(accepted("n2", nodes), ["192.168.200.12"]);
    // The thief gone, the owner has it back.
    assert.deepEqual(accepted("n1", [nodes[0]!]), ["192.168.200.11"]);
  });

  test("a Node missing from the list, with no status or hostile shapes gets nothing and does not throw", () => {
    assert.deepEqual(nodeReplyAddresses("gone", [internal("n1", "192.168.200.11")], INSIDE), {
      accepted: [],
      refused: [],
    });
    const hostile = [
      { name: "n1" },
      { name: "n1", addresses: "x" as never },
      {
        name: "n1",
        addresses: [null, 7, { type: "InternalIP" }, { type: "InternalIP", address: 5 }] as never,
      },
    ];
    for (const n of hostile) {
      const got = nodeReplyAddresses("n1", [n], INSIDE);
      assert.deepEqual(got.accepted, []);
      for (const r of got.refused) assert.equal(r.reason, "is not an IP address");
    }
  });

  test("property: an accepted address is IPv4, outside every inside range, nobody else's, and the verdict does not depend on the Nodes' order", () => {
    const addr = fc.oneof(
      fc.constantFrom(
        "192.168.200.11",
        "192.168.200.12",
        "10.244.0.9",
        "100.64.0.3",
        "127.0.0.1",
        "fd00::1",
        "x",
      ),
      fc.integer({ min: 0, max: 2 ** 32 - 1 }).map((v) => formatIp(ipFromValue(4, BigInt(v)))),
    );
    const nodesArb = fc.uniqueArray(
      fc.record({ name: fc.constantFrom("n1", "n2", "n3", "n4"), ips: fc.array(addr, { maxLength: 20 }) }),
      { selector: (n) => n.name, minLength: 1, maxLength: 4 },
    );
    fc.assert(
      fc.property(nodesArb, fc.integer({ min: 0, max: 3 }), (spec, shift) => {
        const nodes = spec.map((n) => internal(n.name, ...n.ips));
        const rotated = [...nodes.slice(shift % nodes.length), ...nodes.slice(0, shift % nodes.length)];
        const owners = new Map<string, string[]>();
        for (const n of nodes) {
          const got = nodeReplyAddresses(n.name, nodes, INSIDE);
          assert.ok(got.accepted.length <= NODE_REPLY_IPS_MAX);
          assert.deepEqual(nodeReplyAddresses(n.name, rotated, INSIDE), got);
          for (const a of got.accepted) {
            assert.equal(a.family, 4);
            assert.ok(!INSIDE.some((c) => cidrContains(c, a)));
            owners.set(formatIp(a), [...(owners.get(formatIp(a)) ?? []), n.name]);
          }
        }
        for (const [a, who] of owners) assert.equal(who.length, 1, `${a} accepted for ${who.join(", ")}`);
      }),
    );
  });
});
