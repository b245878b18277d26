// Hand-computed cases from the Kubernetes NetworkPolicy documentation: each expectation below was worked out
// from the docs' text, not by running the model.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  type ModelNamespace,
  type ModelPod,
  type NetworkPolicy,
  PolicyModel,
  policyTypes,
} from "./reachability.ts";

const PORTS = [
  { name: "serve-80-tcp", containerPort: 80, protocol: "TCP" as const },
  { name: "serve-81-tcp", containerPort: 81, protocol: "TCP" as const },
  { name: "serve-80-udp", containerPort: 80, protocol: "UDP" as const },
  { name: "serve-81-udp", containerPort: 81, protocol: "UDP" as const },
];

function pod(
  namespace: string,
  name: string,
  node: string,
  ip: string,
  labels: Record<string, string>,
): ModelPod {
  return { namespace, name, node, ip, labels, ports: PORTS };
}

const namespaces: ModelNamespace[] = [
  { name: "default", labels: { "kubernetes.io/metadata.name": "default" } },
  { name: "myproject", labels: { "kubernetes.io/metadata.name": "myproject", project: "myproject" } },
  { name: "other", labels: { "kubernetes.io/metadata.name": "other" } },
];
const pods = [
  pod("default", "db", "node1", "10.244.0.10", { role: "db" }),
  pod("default", "frontend", "node2", "10.244.0.11", { role: "frontend" }),
  pod("default", "plain", "node3", "10.244.0.12", {}),
  pod("myproject", "any", "node2", "10.244.0.20", { role: "x" }),
  pod("other", "frontend", "node3", "10.244.0.30", { role: "frontend" }),
  pod("other", "ext-like", "node3", "172.17.0.9", {}),
  pod("other", "excepted", "node3", "172.17.1.9", {}),
];
const nodes = [
  { name: "node1", addresses: ["192.168.200.11", "100.64.0.2"] },
  { name: "node2", addresses: ["192.168.200.12", "100.64.0.3"] },
  { name: "node3", addresses: ["192.168.200.13", "100.64.0.4"] },
];

function np(namespace: string, name: string, spec: NetworkPolicy["spec"]): NetworkPolicy {
  return { metadata: { namespace, name }, spec };
}

const model = (...policies: NetworkPolicy[]) => new PolicyModel({ namespaces, pods, nodes, policies });
const P = (pod: string) => ({ pod });

// The docs' "test-network-policy" example.
const docsExample = np("default", "test-network-policy", {
  podSelector: { matchLabels: { role: "db" } },
  policyTypes: ["Ingress", "Egress"],
  ingress: [
    {
      from: [
        { ipBlock: { cidr: "172.17.0.0/16", except: ["172.17.1.0/24"] } },
        { namespaceSelector: { matchLabels: { project: "myproject" } } },
        { podSelector: { matchLabels: { role: "frontend" } } },
      ],
      ports: [{ protocol: "TCP", port: 6379 }],
    },
  ],
  egress: [{ to: [{ ipBlock: { cidr: "10.0.0.0/24" } }], ports: [{ protocol: "TCP", port: 5978 }] }],
});

describe("NetworkPolicy model: the documentation's cases", () => {
  it("no policy: every pod reaches every pod on every port", () => {
    const m = model();
    for (const a of pods)
      for (const b of pods)
        for (const proto of ["TCP", "UDP"] as const)
          assert.equal(m.allowed(P(`${a.namespace}/${a.name}`), `${b.namespace}/${b.name}`, proto, 80), true);
  });

  it("the docs' example: db admits frontend pods of its namespace, pods of project=myproject and 172.17/16 minus 172.17.1/24, on TCP 6379 only", () => {
    const m = model(docsExample);
    assert.equal(m.allowed(P("default/frontend"), "default/db", "TCP", 6379), true);
    assert.equal(m.allowed(P("default/frontend"), "default/db", "TCP", 80), false);
    assert.equal(m.allowed(P("default/frontend"), "default/db", "UDP", 6379), false);
    assert.equal(m.allowed(P("myproject/any"), "default/db", "TCP", 6379), true);
    // role=frontend in another namespace: a podSelector-only peer means the policy's own namespace.
    assert.equal(m.allowed(P("other/frontend"), "default/db", "TCP", 6379), false);
    assert.equal(m.allowed(P("default/plain"), "default/db", "TCP", 6379), false);
    assert.equal(m.allowed(P("other/ext-like"), "default/db", "TCP", 6379), true);
    assert.equal(m.allowed(P("other/excepted"), "default/db", "TCP", 6379), false);
    // db is egress-isolated: only 10.0.0.0/24 on TCP 5978, so it reaches no pod here.
    assert.equal(m.allowed(P("default/db"), "default/frontend", "TCP", 80), false);
    // Other pods are not selected: unrestricted among themselves.
    assert.equal(m.allowed(P("default/plain"), "default/frontend", "UDP", 81), true);
  });

  it("policyTypes defaulting: Ingress always; Egress only when egress rules exist", () => {
    assert.deepEqual(policyTypes(np("d", "a", { podSelector: {} })), { ingress: true, egress: false });
    assert.deepEqual(policyTypes(np("d", "a", { podSelector: {}, egress: [] })), {
      ingress: true,
      egress: false,
    });
    assert.deepEqual(policyTypes(np("d", "a", { podSelector: {}, egress: [{}] })), {
      ingress: true,
      egress: true,
    });
    assert.deepEqual(policyTypes(np("d", "a", { podSelector: {}, policyTypes: ["Egress"] })), {
      ingress: false,
      egress: true,
    });
    // Egress rules without policyTypes: ingress isolated too, with no ingress rule: deny all ingress.
    const m = model(np("default", "e", { podSelector: { matchLabels: { role: "db" } }, egress: [{}] }));
    assert.equal(m.allowed(P("default/frontend"), "default/db", "TCP", 80), false);
    assert.equal(m.allowed(P("default/db"), "default/frontend", "TCP", 80), true);
  });

  it("default deny ingress: nothing enters the namespace's pods, except from the pod's own node; egress unaffected", () => {
    const m = model(np("default", "deny", { podSelector: {}, policyTypes: ["Ingress"] }));
    assert.equal(m.allowed(P("default/frontend"), "default/db", "TCP", 80), false);
    assert.equal(m.allowed(P("myproject/any"), "default/db", "UDP", 81), false);
    assert.equal(m.allowed(P("default/db"), "myproject/any", "TCP", 80), true);
    assert.equal(m.allowed({ node: "node1" }, "default/db", "TCP", 80), true, "own node");
    assert.equal(m.allowed({ node: "node2" }, "default/db", "TCP", 80), false, "another node");
    assert.equal(m.allowed(P("default/db"), "default/db", "TCP", 80), true, "a pod reaches itself");
  });

  it("allow all ingress beside a deny: the union admits everything", () => {
    const m = model(
      np("default", "deny", { podSelector: {}, policyTypes: ["Ingress"] }),
      np("default", "allow", { podSelector: {}, ingress: [{}] }),
    );
    assert.equal(m.allowed(P("other/frontend"), "default/db", "UDP", 81), true);
    assert.equal(m.allowed({ node: "node3" }, "default/db", "TCP", 80), true);
  });

  it("default deny egress: the namespace's pods reach nothing, and others still reach them", () => {
    const m = model(np("default", "deny", { podSelector: {}, policyTypes: ["Egress"] }));
    assert.equal(m.allowed(P("default/db"), "default/frontend", "TCP", 80), false);
    assert.equal(m.allowed(P("default/db"), "myproject/any", "UDP", 80), false);
    assert.equal(m.allowed(P("myproject/any"), "default/db", "TCP", 80), true);
    assert.equal(m.allowed({ node: "node2" }, "default/db", "TCP", 80), true);
  });

  it("a connection needs both the source's egress and the destination's ingress", () => {
    const m = model(
      np("default", "db-in", {
        podSelector: { matchLabels: { role: "db" } },
        ingress: [{ from: [{ podSelector: { matchLabels: { role: "frontend" } } }] }],
      }),
      np("default", "fe-out", {
        podSelector: { matchLabels: { role: "frontend" } },
        policyTypes: ["Egress"],
        egress: [{ to: [{ podSelector: {} }], ports: [{ port: 81 }] }],
      }),
    );
    assert.equal(m.allowed(P("default/frontend"), "default/db", "TCP", 81), true);
    assert.equal(m.allowed(P("default/frontend"), "default/db", "TCP", 80), false, "egress allows only 81");
    assert.equal(
      m.allowed(P("default/frontend"), "default/db", "UDP", 81),
      false,
      "protocol defaults to TCP",
    );
    assert.equal(
      m.allowed(P("default/frontend"), "myproject/any", "TCP", 81),
      false,
      "egress peer is own ns",
    );
  });

  it("namespaceSelector and podSelector in one peer is AND; in two peers OR", () => {
    const and = model(
      np("default", "and", {
        podSelector: { matchLabels: { role: "db" } },
        ingress: [
          {
            from: [
              {
                namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "other" } },
                podSelector: { matchLabels: { role: "frontend" } },
              },
            ],
          },
        ],
      }),
    );
    assert.equal(and.allowed(P("other/frontend"), "default/db", "TCP", 80), true);
    assert.equal(and.allowed(P("other/excepted"), "default/db", "TCP", 80), false);
    assert.equal(and.allowed(P("default/frontend"), "default/db", "TCP", 80), false);
    const or = model(
      np("default", "or", {
        podSelector: { matchLabels: { role: "db" } },
        ingress: [
          {
            from: [
              { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": "other" } } },
              { podSelector: { matchLabels: { role: "frontend" } } },
            ],
          },
        ],
      }),
    );
    assert.equal(or.allowed(P("other/excepted"), "default/db", "TCP", 80), true);
    assert.equal(or.allowed(P("default/frontend"), "default/db", "TCP", 80), true);
    assert.equal(or.allowed(P("myproject/any"), "default/db", "TCP", 80), false);
  });

  it("an empty namespaceSelector peer means every pod of every namespace", () => {
    const m = model(
      np("default", "all-ns", { podSelector: {}, ingress: [{ from: [{ namespaceSelector: {} }] }] }),
    );
    assert.equal(m.allowed(P("myproject/any"), "default/db", "UDP", 80), true);
    assert.equal(m.allowed({ node: "node2" }, "default/db", "UDP", 80), false, "a node is no pod");
  });

  it("endPort: the docs' range 32000-32768 includes both ends", () => {
    const m = model(
      np("default", "range", {
        podSelector: { matchLabels: { role: "db" } },
        ingress: [{ ports: [{ protocol: "TCP", port: 32000, endPort: 32768 }] }],
      }),
    );
    for (const [port, ok] of [
      [31999, false],
      [32000, true],
      [32500, true],
      [32768, true],
      [32769, false],
    ] as const)
      assert.equal(m.allowed(P("default/plain"), "default/db", "TCP", port), ok, `port ${port}`);
    assert.equal(m.allowed(P("default/plain"), "default/db", "UDP", 32000), false);
  });

  it("named ports resolve on the destination: ingress on the selected pod, egress on the peer; an undeclared name matches nothing", () => {
    const other: ModelPod = {
      ...pod("default", "renamed", "node1", "10.244.0.13", { role: "db" }),
      ports: [{ name: "serve-80-tcp", containerPort: 81, protocol: "TCP" }],
    };
    const m = new PolicyModel({
      namespaces,
      nodes,
      pods: [...pods, other],
      policies: [
        np("default", "named-in", {
          podSelector: { matchLabels: { role: "db" } },
          ingress: [{ ports: [{ port: "serve-80-tcp" }, { protocol: "UDP", port: "no-such-port" }] }],
        }),
        np("default", "named-out", {
          podSelector: { matchLabels: { role: "frontend" } },
          policyTypes: ["Egress"],
          egress: [{ ports: [{ protocol: "UDP", port: "serve-81-udp" }] }],
        }),
      ],
    });
    assert.equal(m.allowed(P("default/plain"), "default/db", "TCP", 80), true);
    assert.equal(m.allowed(P("default/plain"), "default/db", "TCP", 81), false);
    // The same name is port 81 on "renamed".
    assert.equal(m.allowed(P("default/plain"), "default/renamed", "TCP", 81), true);
    assert.equal(m.allowed(P("default/plain"), "default/renamed", "TCP", 80), false);
    assert.equal(m.allowed(P("default/plain"), "default/db", "UDP", 80), false, "undeclared UDP name");
    // Egress: serve-81-udp is UDP 81 on the destination; the name does not match TCP.
    assert.equal(m.allowed(P("default/frontend"), "default/plain", "UDP", 81), true);
    assert.equal(m.allowed(P("default/frontend"), "default/plain", "UDP", 80), false);
    assert.equal(m.allowed(P("default/frontend"), "default/plain", "TCP", 81), false);
    assert.equal(
      m.allowed(P("default/frontend"), "default/renamed", "UDP", 81),
      false,
      "renamed declares no UDP",
    );
  });

  it("ipBlock judges node traffic by the node's addresses; the pod's own node passes regardless", () => {
    const m = model(
      np("default", "nodes", {
        podSelector: {},
        ingress: [{ from: [{ ipBlock: { cidr: "192.168.200.0/24", except: ["192.168.200.13/32"] } }] }],
      }),
    );
    assert.equal(m.allowed({ node: "node2" }, "default/db", "TCP", 80), true);
    assert.equal(m.allowed({ node: "node3" }, "default/db", "TCP", 80), false);
    assert.equal(m.allowed({ node: "node3" }, "default/plain", "TCP", 80), true, "own node");
    assert.equal(
      m.allowed(P("default/frontend"), "default/db", "TCP", 80),
      false,
      "pod IP outside the block",
    );
  });

  it("egress to an ipBlock holding a pod's IP reaches that pod, except what `except` cuts", () => {
    const m = model(
      np("default", "cidr-out", {
        podSelector: { matchLabels: { role: "db" } },
        policyTypes: ["Egress"],
        egress: [{ to: [{ ipBlock: { cidr: "10.244.0.0/24", except: ["10.244.0.11/32"] } }] }],
      }),
    );
    assert.equal(m.allowed(P("default/db"), "default/plain", "TCP", 80), true);
    assert.equal(m.allowed(P("default/db"), "default/frontend", "TCP", 80), false);
    assert.equal(m.allowed(P("default/db"), "other/ext-like", "TCP", 80), false);
  });

  it("hostNetwork pods are never selected and are judged as their node", () => {
    const host: ModelPod = {
      ...pod("default", "host", "node2", "192.168.200.12", { role: "db" }),
      hostNetwork: true,
    };
    const m = new PolicyModel({
      namespaces,
      nodes,
      pods: [...pods, host],
      policies: [
        np("default", "deny", { podSelector: {}, policyTypes: ["Ingress", "Egress"] }),
        np("default", "db-from-db", {
          podSelector: {},
          ingress: [{ from: [{ podSelector: { matchLabels: { role: "db" } } }] }],
        }),
      ],
    });
    assert.equal(m.isolated("default/host", "ingress"), false);
    assert.equal(m.allowed(P("default/host"), "default/db", "TCP", 80), false, "not a pod peer, not node1");
    assert.equal(m.allowed(P("default/host"), "default/frontend", "TCP", 80), true, "its own node (node2)");
  });

  it("refuses what API validation refuses: ipBlock with a selector, endPort with a named port, an empty peer", () => {
    assert.throws(
      () =>
        model(
          np("d", "x", {
            podSelector: {},
            ingress: [{ from: [{ ipBlock: { cidr: "10.0.0.0/8" }, podSelector: {} }] }],
          }),
        ),
      /ipBlock cannot be combined/,
    );
    assert.throws(
      () => model(np("d", "x", { podSelector: {}, ingress: [{ ports: [{ port: "web", endPort: 90 }] }] })),
      /endPort needs a numeric port/,
    );
    assert.throws(() => model(np("d", "x", { podSelector: {}, egress: [{ to: [{}] }] })), /a peer needs/);
  });
});
