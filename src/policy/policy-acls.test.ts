import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type IpAddress, parseIp } from "../ipam/address.ts";
import { DEFAULT_DENY, NEIGHBOUR_ALLOW, OWN_NODE_ALLOW, POLICY_ALLOW } from "./acl-priority.ts";
import { isolationRows, nodeRows } from "./isolation-acls.ts";
import { peerSetName, policyGroupName } from "./nb-names.ts";
import { type PolicyInputs, policyRows } from "./policy-acls.ts";
import { type Peer, type PodPeer, type PolicyModel, parseNetworkPolicy, peerKey } from "./policy-model.ts";
import { blockContains, type PolicyPod, peerSelects, policySelects, resolveNamedPort } from "./selection.ts";

const np = (spec: Record<string, unknown>) =>
  parseNetworkPolicy({ metadata: { namespace: "ns", name: "p" }, spec });
const none: PolicyInputs = {
  families: [4],
  ingressNamed: () => new Map(),
  egressNamed: () => new Map(),
  nodeMgmtIps: () => [],
};
const acls = (rows: ReturnType<typeof policyRows>) =>
  rows.rows
    .filter((r) => r.table === "ACL")
    .map(
      (r) =>
        r.row as {
          direction: string;
          match: string;
          priority: number;
          action: string;
          options: Record<string, string>;
        },
    );

function firstPeer(rules: PolicyModel["ingress"]): Peer {
  const peers = rules?.[0]?.peers;
  assert.ok(peers && peers !== "all" && peers[0]);
  return peers[0];
}

interface Pod extends PolicyPod {
  ips: IpAddress[];
}
const pod = (
  namespace: string,
  labels: Record<string, string>,
  ip: string,
  ports: PolicyPod["namedPorts"] = [],
  hostNetwork = false,
): Pod => ({
  namespace,
  labels,
  hostNetwork,
  namedPorts: ports,
  ips: [parseIp(ip)],
});

describe("policy rows", () => {
  const G = policyGroupName("ns/p");

  it("ingress from a pod peer on a port: one to-lport allow-related ACL on the policy's group", () => {
    const m = np({
      podSelector: {},
      ingress: [
        {
          from: [{ podSelector: { matchLabels: { a: "1" } } }],
          ports: [{ port: 80 }, { port: 90, endPort: 99, protocol: "UDP" }],
        },
      ],
    });
    const peer = firstPeer(m.ingress) as PodPeer;
    const [acl, ...rest] = acls(policyRows(m, none));
    assert.equal(rest.length, 0);
    assert.deepEqual(acl, {
      direction: "to-lport",
      priority: POLICY_ALLOW,
      action: "allow-related",
      match: `outport == @${G} && ip4.src == $${peerSetName(peerKey(peer), 4)} && (tcp.dst == 80 || 90 <= udp.dst <= 99)`,
      options: {},
      external_ids: (acl as unknown as { external_ids: unknown }).external_ids,
    });
  });

  it("egress ACLs are from-lport with apply-after-lb; an empty rule allows all ip", () => {
    const m = np({ podSelector: {}, policyTypes: ["Egress"], egress: [{}] });
    const [acl] = acls(policyRows(m, none));
    assert.equal(acl?.direction, "from-lport");
    assert.equal(acl?.match, `inport == @${G} && ip`);
    assert.deepEqual(acl?.options, { "apply-after-lb": "true" });
  });

  it("deny-all (no rules) has a group and no ACL", () => {
    const r = policyRows(np({ podSelector: {} }), none);
    assert.equal(acls(r).length, 0);
    assert.equal(r.rows.filter((x) => x.table === "Port_Group").length, 1);
  });

  it("ipBlock: except inline, and the management IP of a node inside the block in ingress", () => {
    const m = np({
      podSelector: {},
      ingress: [{ from: [{ ipBlock: { cidr: "192.168.0.0/16", except: ["192.168.9.0/24"] } }] }],
    });
    const [acl] = acls(policyRows(m, { ...none, nodeMgmtIps: () => [parseIp("100.64.0.5")] }));
    assert.equal(
      acl?.match,
      `outport == @${G} && ((ip4.src == 192.168.0.0/16 && ip4.src != {192.168.9.0/24}) || ip4.src == {100.64.0.5})`,
    );
  });

  it("dual stack: a pod peer matches both families' sets", () => {
    const m = np({ podSelector: {}, ingress: [{ from: [{ namespaceSelector: {} }] }] });
    const peer = firstPeer(m.ingress) as PodPeer;
    const [acl] = acls(policyRows(m, { ...none, families: [4, 6] }));
    const k = peerKey(peer);
    assert.equal(
      acl?.match,
      `outport == @${G} && (ip4.src == $${peerSetName(k, 4)} || ip6.src == $${peerSetName(k, 6)})`,
    );
  });

  it("named ports resolve per destination pod: one set and ACL per number, none for an undeclared name", () => {
    const server1 = pod("ns", { app: "s" }, "10.0.0.1", [{ name: "web", protocol: "tcp", port: 8080 }]);
    const server2 = pod("ns", { app: "s" }, "10.0.0.2", [{ name: "web", protocol: "tcp", port: 9090 }]);
    const server3 = pod("ns", { app: "s" }, "10.0.0.3", [{ name: "web", protocol: "udp", port: 8080 }]);
    const m = np({
      podSelector: { matchLabels: { app: "s" } },
      ingress: [{ ports: [{ port: "web" }, { port: "nothing" }] }],
    });
    const selected = [server1, server2, server3].filter((p) => policySelects(m, p));
    const rows = policyRows(m, {
      ...none,
      ingressNamed: (n, proto) => resolveNamedPort(selected, (p) => p.ips, n, proto),
    });
    const matches = acls(rows).map((a) => a.match);
    assert.equal(matches.length, 2);
    assert.match(matches[0] ?? "", /ip4\.dst == \$zovn_np_named_[0-9a-f]{16}_v4 && tcp\.dst == 8080$/);
    assert.match(matches[1] ?? "", /tcp\.dst == 9090$/);
    assert.deepEqual([...rows.namedSets.values()], [["10.0.0.1"], ["10.0.0.2"]]);
  });

  it("egress named ports: the set is the rule's peers declaring the port, no peer term in the ACL", () => {
    const m = np({
      podSelector: {},
      policyTypes: ["Egress"],
      egress: [{ to: [{ podSelector: { matchLabels: { app: "db" } } }], ports: [{ port: "sql" }] }],
    });
    const peer = firstPeer(m.egress) as PodPeer;
    const db = pod("ns", { app: "db" }, "10.0.0.5", [{ name: "sql", protocol: "tcp", port: 5432 }]);
    const other = pod("ns", { app: "x" }, "10.0.0.6", [{ name: "sql", protocol: "tcp", port: 5432 }]);
    const peers = [db, other].filter((p) => peerSelects(peer, p, {}));
    const rows = policyRows(m, {
      ...none,
      egressNamed: (_r, n, proto) => resolveNamedPort(peers, (p) => p.ips, n, proto),
    });
    const [acl] = acls(rows);
    assert.match(
      acl?.match ?? "",
      /^inport == @zovn_np_[0-9a-f]{16} && ip4\.dst == \$zovn_np_named_[0-9a-f]{16}_v4 && tcp\.dst == 5432$/,
    );
    assert.deepEqual([...rows.namedSets.values()], [["10.0.0.5"]]);
  });

  it("ACL ids are stable per match: changing one rule changes one id", () => {
    const a = policyRows(
      np({ podSelector: {}, ingress: [{ ports: [{ port: 80 }] }, { ports: [{ port: 81 }] }] }),
      none,
    );
    const b = policyRows(
      np({ podSelector: {}, ingress: [{ ports: [{ port: 80 }] }, { ports: [{ port: 82 }] }] }),
      none,
    );
    const ids = (r: typeof a) => new Set(r.rows.filter((x) => x.table === "ACL").map((x) => x.id));
    const shared = [...ids(a)].filter((x) => ids(b).has(x));
    assert.equal(shared.length, 1);
  });
});

describe("selection", () => {
  it("a policy selects non-host-network pods of its namespace by label", () => {
    const m = np({ podSelector: { matchLabels: { a: "1" } } });
    assert.ok(policySelects(m, pod("ns", { a: "1" }, "10.0.0.1")));
    assert.ok(!policySelects(m, pod("other", { a: "1" }, "10.0.0.1")));
    assert.ok(!policySelects(m, pod("ns", { a: "1" }, "10.0.0.1", [], true)));
  });

  it("a namespaceSelector peer follows the namespace's labels", () => {
    const m = np({
      podSelector: {},
      ingress: [{ from: [{ namespaceSelector: { matchLabels: { t: "x" } } }] }],
    });
    const peer = firstPeer(m.ingress) as PodPeer;
    const p = pod("other", {}, "10.0.0.1");
    assert.ok(peerSelects(peer, p, { t: "x" }));
    assert.ok(!peerSelects(peer, p, { t: "y" }));
    assert.ok(!peerSelects(peer, p, undefined));
  });

  it("blockContains honours except", () => {
    const m = np({
      podSelector: {},
      ingress: [{ from: [{ ipBlock: { cidr: "10.0.0.0/8", except: ["10.1.0.0/16"] } }] }],
    });
    const b = firstPeer(m.ingress) as never;
    assert.ok(blockContains(b, parseIp("10.2.0.1")));
    assert.ok(!blockContains(b, parseIp("10.1.0.1")));
    assert.ok(!blockContains(b, parseIp("11.0.0.1")));
  });
});

describe("isolation rows", () => {
  it("the default deny per direction, ARP/ND above it, egress after load balancing", () => {
    const eg = isolationRows("egress")
      .filter((r) => r.table === "ACL")
      .map((r) => r.row);
    assert.deepEqual(
      eg.map((r) => [r.priority, r.action, r.match, r.options]),
      [
        [DEFAULT_DENY, "drop", "inport == @zovn_np_isolated_egress && ip", { "apply-after-lb": "true" }],
        [
          NEIGHBOUR_ALLOW,
          "allow",
          "inport == @zovn_np_isolated_egress && (arp || nd)",
          { "apply-after-lb": "true" },
        ],
      ],
    );
    const ing = isolationRows("ingress")
      .filter((r) => r.table === "ACL")
      .map((r) => r.row);
    assert.equal(ing[0]?.direction, "to-lport");
    assert.equal(ing[0]?.match, "outport == @zovn_np_isolated_ingress && ip");
  });

  it("the own-node group allows its management IPs; with none known it has no ACL", () => {
    const rows = nodeRows("n1", [parseIp("100.64.0.3"), parseIp("fd00::3")]);
    const acl = rows.find((r) => r.table === "ACL")?.row;
    assert.equal(acl?.priority, OWN_NODE_ALLOW);
    assert.match(
      String(acl?.match),
      /^outport == @zovn_np_node_[0-9a-f]{16} && \(ip4\.src == \{100\.64\.0\.3\} \|\| ip6\.src == \{fd00::3\}\)$/,
    );
    assert.equal(nodeRows("n1", []).filter((r) => r.table === "ACL").length, 0);
  });
});
