// The Kubernetes side of make bench-policy: N namespaces × P pods on a few Node objects (no kubelet: the pods
// stay Pending, but the controller gives each a port and an address), and 10 policies per namespace in a mix of
// what clusters write: deny-all each way, allow from a namespace selector, from a pod selector, both in one
// peer, ipBlock with except, named ports, endPort ranges, matchExpressions, egress to pods and to CIDRs.
import type { ApiClient } from "../../src/k8s/api-client.ts";

export const NODES = ["bench-node1", "bench-node2", "bench-node3"];
export const POLICIES_PER_NAMESPACE = 10;
export const nsName = (i: number) => `np-${i}`;
export const podName = (j: number) => `p-${j}`;
export const policyName = (k: number) => `pol-${k}`;
/** Namespaces fall into five teams; namespace selectors name teams, so peer sets are shared across namespaces. */
const team = (i: number) => `t${i % 5}`;

/** Pod j's labels: app a0..a4 twice over, front for the first half. */
export function podLabels(j: number, podsPerNamespace: number): Record<string, string> {
  return { app: `a${j % 5}`, tier: j < podsPerNamespace / 2 ? "front" : "back" };
}

/** The k-th policy of namespace i (k < POLICIES_PER_NAMESPACE). */
export function policySpec(i: number, k: number): Record<string, unknown> {
  const other = team(i + 1);
  switch (k % POLICIES_PER_NAMESPACE) {
    case 0: // deny all ingress
      return { podSelector: {}, policyTypes: ["Ingress"] };
    case 1: // from a namespace selector to one app, one port
      return {
        podSelector: { matchLabels: { app: "a1" } },
        ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: other } } }], ports: [{ port: 80 }] }],
      };
    case 2: // from a pod selector to a named port
      return {
        podSelector: { matchLabels: { app: "a0" } },
        ingress: [{ from: [{ podSelector: { matchLabels: { app: "a2" } } }], ports: [{ port: "http" }] }],
      };
    case 3: // ipBlock with except
      return {
        podSelector: { matchLabels: { tier: "front" } },
        ingress: [
          {
            from: [{ ipBlock: { cidr: "10.0.0.0/8", except: ["10.1.0.0/16", "10.2.0.0/16"] } }],
            ports: [{ port: 443 }],
          },
        ],
      };
    case 4: // egress to pods of other namespaces, UDP
      return {
        podSelector: { matchLabels: { app: "a3" } },
        policyTypes: ["Egress"],
        egress: [
          {
            to: [
              {
                namespaceSelector: { matchLabels: { team: other } },
                podSelector: { matchLabels: { app: "a4" } },
              },
            ],
            ports: [{ port: 53, protocol: "UDP" }],
          },
        ],
      };
    case 5: // egress to the outside only
      return {
        podSelector: { matchLabels: { app: "a3" } },
        policyTypes: ["Egress"],
        egress: [{ to: [{ ipBlock: { cidr: "0.0.0.0/0", except: ["10.244.0.0/16"] } }] }],
      };
    case 6: // matchExpressions and an endPort range
      return {
        podSelector: { matchExpressions: [{ key: "app", operator: "In", values: ["a1", "a2"] }] },
        ingress: [
          {
            from: [
              { podSelector: { matchExpressions: [{ key: "tier", operator: "NotIn", values: ["back"] }] } },
            ],
            ports: [{ port: 8000, endPort: 8100 }],
          },
        ],
      };
    case 7: // namespace and pod selector in one peer, to a named port
      return {
        podSelector: { matchLabels: { tier: "back" } },
        ingress: [
          {
            from: [
              {
                namespaceSelector: { matchLabels: { team: team(i) } },
                podSelector: { matchLabels: { app: "a1" } },
              },
            ],
            ports: [{ port: "http" }, { port: "metrics" }],
          },
        ],
      };
    case 8: // deny all egress of one app
      return { podSelector: { matchLabels: { app: "a4" } }, policyTypes: ["Egress"] };
    default: // from every namespace to a named port
      return {
        podSelector: {},
        ingress: [{ from: [{ namespaceSelector: {} }], ports: [{ port: "http" }] }],
      };
  }
}

/** Runs `fn` over 0..n-1 with at most `inFlight` calls pending. */
export async function pooled(
  n: number,
  inFlight: number,
  fn: (i: number) => Promise<unknown>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < n; i = next++) await fn(i);
  };
  await Promise.all(Array.from({ length: Math.min(n, inFlight) }, worker));
}

/** Nodes, namespaces (with the `default` ServiceAccount admission wants) and pods. */
export async function createWorkload(
  api: ApiClient,
  namespaces: number,
  podsPerNamespace: number,
  inFlight: number,
): Promise<void> {
  for (const name of NODES)
    await api.request("/api/v1/nodes", { method: "POST", body: { metadata: { name } } });
  await pooled(namespaces, inFlight, async (i) => {
    await api.request("/api/v1/namespaces", {
      method: "POST",
      body: { metadata: { name: nsName(i), labels: { team: team(i) } } },
    });
    await api.request(`/api/v1/namespaces/${nsName(i)}/serviceaccounts`, {
      method: "POST",
      body: { metadata: { name: "default" } },
    });
  });
  await pooled(namespaces * podsPerNamespace, inFlight, async (n) => {
    const i = Math.floor(n / podsPerNamespace);
    const j = n % podsPerNamespace;
    await api.request(`/api/v1/namespaces/${nsName(i)}/pods`, {
      method: "POST",
      body: {
        metadata: { name: podName(j), labels: podLabels(j, podsPerNamespace) },
        spec: {
          nodeName: NODES[n % NODES.length],
          containers: [
            {
              name: "c",
              image: "registry.invalid/pause:3.9",
              ports: [
                // Two numbers for one name across a namespace: the named-port sets split by number.
                { name: "http", containerPort: 8080 + (j % 2), protocol: "TCP" },
                { name: "metrics", containerPort: 9090, protocol: "TCP" },
              ],
            },
          ],
        },
      },
    });
  });
}

export async function createPolicies(api: ApiClient, namespaces: number, inFlight: number): Promise<void> {
  await pooled(namespaces * POLICIES_PER_NAMESPACE, inFlight, async (n) => {
    const i = Math.floor(n / POLICIES_PER_NAMESPACE);
    const k = n % POLICIES_PER_NAMESPACE;
    await api.request(`/apis/networking.k8s.io/v1/namespaces/${nsName(i)}/networkpolicies`, {
      method: "POST",
      body: { metadata: { name: policyName(k) }, spec: policySpec(i, k) },
    });
  });
}
