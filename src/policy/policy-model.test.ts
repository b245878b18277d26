import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { formatCidr } from "../ipam/cidr.ts";
import { type PodPeer, parseNetworkPolicy, peerKey, podPeersOf } from "./policy-model.ts";

const np = (spec: Record<string, unknown>) =>
  parseNetworkPolicy({ metadata: { namespace: "ns", name: "p" }, spec });

describe("NetworkPolicy model", () => {
  it("policyTypes absent: Ingress always, Egress only when egress rules exist", () => {
    const a = np({ podSelector: {} });
    assert.deepEqual(a.ingress, []);
    assert.equal(a.egress, undefined);
    const b = np({ podSelector: {}, egress: [{}] });
    assert.deepEqual(b.ingress, []);
    assert.equal(b.egress?.length, 1);
    const c = np({ podSelector: {}, egress: [] });
    assert.equal(c.egress, undefined);
    const d = np({ podSelector: {}, policyTypes: [], egress: [{}] });
    assert.deepEqual(d.ingress, []);
    assert.equal(d.egress?.length, 1);
  });

  it("policyTypes present: exactly the listed directions, rules of others ignored", () => {
    const e = np({ podSelector: {}, policyTypes: ["Egress"], ingress: [{}] });
    assert.equal(e.ingress, undefined);
    assert.deepEqual(e.egress, []);
    const both = np({ podSelector: {}, policyTypes: ["Ingress", "Egress"] });
    assert.deepEqual(both.ingress, []);
    assert.deepEqual(both.egress, []);
  });

  it("empty from and ports mean all peers and all ports", () => {
    const m = np({ podSelector: {}, ingress: [{ from: [], ports: [] }, {}] });
    assert.deepEqual(m.ingress, [
      { peers: "all", ports: "all" },
      { peers: "all", ports: "all" },
    ]);
  });

  it("ports: protocol defaults to TCP; number, endPort range, name and protocol-only forms", () => {
    const m = np({
      podSelector: {},
      ingress: [
        {
          ports: [
            { port: 80 },
            { protocol: "UDP", port: 53, endPort: 60 },
            { port: "serve-80-tcp" },
            { protocol: "SCTP" },
          ],
        },
      ],
    });
    assert.deepEqual(m.ingress?.[0]?.ports, [
      { kind: "range", protocol: "tcp", from: 80, to: 80 },
      { kind: "range", protocol: "udp", from: 53, to: 60 },
      { kind: "named", protocol: "tcp", name: "serve-80-tcp" },
      { kind: "any", protocol: "sctp" },
    ]);
  });

  it("ipBlock: host bits are masked as the API reads them; except is kept sorted", () => {
    const m = np({
      podSelector: {},
      ingress: [{ from: [{ ipBlock: { cidr: "10.1.2.3/16", except: ["10.1.9.0/24", "10.1.3.0/24"] } }] }],
    });
    const peers = m.ingress?.[0]?.peers;
    assert.ok(peers !== "all" && peers?.[0]?.kind === "ipBlock");
    const b = peers[0];
    assert.ok(b?.kind === "ipBlock");
    assert.equal(formatCidr(b.cidr), "10.1.0.0/16");
    assert.deepEqual(b.except.map(formatCidr), ["10.1.3.0/24", "10.1.9.0/24"]);
  });

  it("a podSelector-only peer is scoped to the policy's namespace; namespaceSelector to the selected ones", () => {
    const m = np({
      podSelector: {},
      ingress: [
        {
          from: [
            { podSelector: { matchLabels: { a: "1" } } },
            { namespaceSelector: {} },
            { namespaceSelector: { matchLabels: { t: "x" } }, podSelector: { matchLabels: { a: "1" } } },
          ],
        },
      ],
    });
    const peers = m.ingress?.[0]?.peers as PodPeer[];
    assert.deepEqual(peers[0]?.namespaces, { name: "ns" });
    assert.ok(peers[1] && "selector" in peers[1].namespaces);
    assert.equal(podPeersOf(m).size, 3);
  });

  it("peer keys: equal peers in two policies share a key; the namespace scope is part of it", () => {
    const a = parseNetworkPolicy({
      metadata: { namespace: "x", name: "a" },
      spec: { podSelector: {}, ingress: [{ from: [{ podSelector: { matchLabels: { a: "1", b: "2" } } }] }] },
    });
    const b = parseNetworkPolicy({
      metadata: { namespace: "x", name: "b" },
      spec: { podSelector: {}, egress: [{ to: [{ podSelector: { matchLabels: { b: "2", a: "1" } } }] }] },
    });
    const c = parseNetworkPolicy({
      metadata: { namespace: "y", name: "c" },
      spec: { podSelector: {}, ingress: [{ from: [{ podSelector: { matchLabels: { a: "1", b: "2" } } }] }] },
    });
    const key = (m: ReturnType<typeof parseNetworkPolicy>) => [...podPeersOf(m).keys()][0];
    assert.equal(key(a), key(b));
    assert.notEqual(key(a), key(c));
    const all = peerKey({
      kind: "pods",
      namespaces: { selector: { requirements: [] } },
      pods: { requirements: [] },
    });
    assert.notEqual(all, key(a));
  });

  it("unrealizable input is refused with the field and the reason", () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [
        { ingress: [{ ports: [{ endPort: 90 }] }] },
        /spec\.ingress\[0\]\.ports\[0\]\.endPort: needs a numeric port/,
      ],
      [
        { ingress: [{ ports: [{ port: 90, endPort: 80 }] }] },
        /spec\.ingress\[0\]\.ports\[0\]\.endPort: 80 is below port 90/,
      ],
      [
        { egress: [{ ports: [{ port: "http", endPort: 80 }] }] },
        /spec\.egress\[0\]\.ports\[0\]\.endPort: cannot be used with a named port/,
      ],
      [{ ingress: [{ ports: [{ protocol: "ICMP" }] }] }, /spec\.ingress\[0\]\.ports\[0\]\.protocol/],
      [{ ingress: [{ ports: [{ port: 70000 }] }] }, /ports\[0\]\.port: 70000 is not a port number/],
      [{ ingress: [{ ports: [{ port: "Bad_Name" }] }] }, /ports\[0\]\.port: "Bad_Name" is not a port name/],
      [
        { ingress: [{ from: [{ ipBlock: { cidr: "10.0.0.0/33" } }] }] },
        /spec\.ingress\[0\]\.from\[0\]\.ipBlock\.cidr/,
      ],
      [{ ingress: [{ from: [{ ipBlock: { cidr: "nope/8" } }] }] }, /from\[0\]\.ipBlock\.cidr/],
      [
        { ingress: [{ from: [{ ipBlock: { cidr: "10.0.0.0/8", except: ["11.0.0.0/16"] } }] }] },
        /ipBlock\.except\[0\]: 11\.0\.0\.0\/16 must be strictly inside 10\.0\.0\.0\/8/,
      ],
      [
        { ingress: [{ from: [{ ipBlock: { cidr: "10.0.0.0/8" }, podSelector: {} }] }] },
        /from\[0\]: ipBlock cannot be combined/,
      ],
      [{ ingress: [{ from: [{}] }] }, /from\[0\]: must set podSelector, namespaceSelector or ipBlock/],
      [{ policyTypes: ["Both"] }, /spec\.policyTypes\[0\]/],
      [
        { podSelector: { matchExpressions: [{ key: "a", operator: "Bad" }] } },
        /spec\.podSelector\.matchExpressions\[0\]\.operator/,
      ],
    ];
    for (const [spec, re] of cases)
      assert.throws(() => np({ podSelector: {}, ...spec }), re, JSON.stringify(spec));
  });
});
