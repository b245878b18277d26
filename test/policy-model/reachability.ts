// An independent model of networking.k8s.io/v1 NetworkPolicy, written from the Kubernetes documentation
// (concepts/services-networking/network-policies and the API reference), never from src/policy: the e2e
// matrices compare what the controller makes OVN do with what this says the API means.
//
// What it encodes, in the docs' words where it can:
// - A pod is isolated for ingress (egress) when some policy in its namespace selects it with "Ingress"
//   ("Egress") in its policyTypes; otherwise everything in that direction is allowed.
// - policyTypes, when absent, is defaulted by the API server: Ingress always, Egress when the policy has at
//   least one egress rule.
// - An isolated pod allows what the union of the rules of every policy selecting it allows; a connection
//   between two pods needs the source's egress and the destination's ingress to allow it.
// - "the only allowed connections into the pod are those from the pod's node and those allowed by the
//   ingress list": traffic from the pod's own node always passes ingress.
// - A rule with no `from`/`to` matches every peer, with no `ports` every port. A peer with podSelector only
//   means pods of the policy's namespace, namespaceSelector only all pods of those namespaces, both: pods
//   matching podSelector in those namespaces; ipBlock matches addresses (pod IPs included).
// - A port is a number, a number range (endPort), or a name resolved on the destination pod (in ingress the
//   selected pod, in egress the peer); a name the pod does not declare for that protocol matches nothing.
// - Replies of allowed connections are implicit (the model judges connection openings only), and a pod
//   always reaches itself (loopback never leaves the pod).
// - hostNetwork pods are never selected by any selector; their traffic is their node's.
import { type IPBlock, inIpBlock } from "./ip-block.ts";
import { type LabelSelector, type Labels, selects } from "./label-selector.ts";

export type Protocol = "TCP" | "UDP" | "SCTP";

export interface NetworkPolicyPort {
  protocol?: Protocol;
  port?: number | string;
  endPort?: number;
}

export interface NetworkPolicyPeer {
  podSelector?: LabelSelector;
  namespaceSelector?: LabelSelector;
  ipBlock?: IPBlock;
}

export interface NetworkPolicy {
  metadata: { name: string; namespace: string };
  spec: {
    podSelector: LabelSelector;
    policyTypes?: Array<"Ingress" | "Egress">;
    ingress?: Array<{ from?: NetworkPolicyPeer[]; ports?: NetworkPolicyPort[] }>;
    egress?: Array<{ to?: NetworkPolicyPeer[]; ports?: NetworkPolicyPort[] }>;
  };
}

export interface ModelNamespace {
  name: string;
  labels: Labels;
}

export interface ContainerPort {
  name?: string;
  containerPort: number;
  protocol?: Protocol;
}

export interface ModelPod {
  namespace: string;
  name: string;
  labels: Labels;
  node: string;
  ip: string;
  ports: readonly ContainerPort[];
  hostNetwork?: boolean;
}

export interface ModelNode {
  name: string;
  /** Every address the node's traffic may carry as its source (node IP, management IP ...). */
  addresses: readonly string[];
}

export interface ModelCluster {
  namespaces: readonly ModelNamespace[];
  pods: readonly ModelPod[];
  nodes: readonly ModelNode[];
  policies: readonly NetworkPolicy[];
}

/** Where a connection comes from: a pod ("ns/name") or a node's own network stack. */
export type Source = { pod: string } | { node: string };

const podKey = (p: { namespace: string; name: string }) => `${p.namespace}/${p.name}`;

/** The effective policyTypes after the API server's defaulting. */
export function policyTypes(policy: NetworkPolicy): { ingress: boolean; egress: boolean } {
  const types = policy.spec.policyTypes;
  if (types && types.length > 0)
    return { ingress: types.includes("Ingress"), egress: types.includes("Egress") };
  return { ingress: true, egress: (policy.spec.egress ?? []).length > 0 };
}

function checkPeer(peer: NetworkPolicyPeer, where: string): void {
  const selectors = peer.podSelector !== undefined || peer.namespaceSelector !== undefined;
  if (peer.ipBlock && selectors) throw new Error(`${where}: ipBlock cannot be combined with selectors`);
  if (!peer.ipBlock && !selectors)
    throw new Error(`${where}: a peer needs podSelector, namespaceSelector or ipBlock`);
}

function checkPort(port: NetworkPolicyPort, where: string): void {
  if (port.endPort === undefined) return;
  if (typeof port.port !== "number") throw new Error(`${where}: endPort needs a numeric port`);
  if (port.endPort < port.port) throw new Error(`${where}: endPort below port`);
}

/** A party of a connection as a peer sees it: its addresses, and for a (non-hostNetwork) pod its identity. */
interface Party {
  addresses: readonly string[];
  pod?: ModelPod;
  node: string;
}

export class PolicyModel {
  private readonly pods = new Map<string, ModelPod>();
  private readonly nsLabels = new Map<string, Labels>();
  private readonly nodes = new Map<string, ModelNode>();
  private readonly policies: readonly NetworkPolicy[];

  constructor(cluster: ModelCluster) {
    for (const ns of cluster.namespaces) this.nsLabels.set(ns.name, ns.labels);
    for (const p of cluster.pods) this.pods.set(podKey(p), p);
    for (const n of cluster.nodes) this.nodes.set(n.name, n);
    for (const pol of cluster.policies) {
      const id = podKey(pol.metadata);
      for (const [i, r] of (pol.spec.ingress ?? []).entries()) {
        for (const [j, peer] of (r.from ?? []).entries()) checkPeer(peer, `${id} ingress[${i}].from[${j}]`);
        for (const [j, port] of (r.ports ?? []).entries()) checkPort(port, `${id} ingress[${i}].ports[${j}]`);
      }
      for (const [i, r] of (pol.spec.egress ?? []).entries()) {
        for (const [j, peer] of (r.to ?? []).entries()) checkPeer(peer, `${id} egress[${i}].to[${j}]`);
        for (const [j, port] of (r.ports ?? []).entries()) checkPort(port, `${id} egress[${i}].ports[${j}]`);
      }
    }
    this.policies = cluster.policies;
  }

  private pod(key: string): ModelPod {
    const p = this.pods.get(key);
    if (!p) throw new Error(`model: no pod ${key}`);
    return p;
  }

  private namespaceLabels(ns: string): Labels {
    const l = this.nsLabels.get(ns);
    if (!l) throw new Error(`model: no namespace ${ns}`);
    return l;
  }

  /** The policies that select `pod` (same namespace, podSelector matches; never a hostNetwork pod). */
  private selecting(pod: ModelPod): NetworkPolicy[] {
    if (pod.hostNetwork) return [];
    return this.policies.filter(
      (pol) => pol.metadata.namespace === pod.namespace && selects(pol.spec.podSelector, pod.labels),
    );
  }

  isolated(podRef: string, direction: "ingress" | "egress"): boolean {
    return this.selecting(this.pod(podRef)).some((pol) => policyTypes(pol)[direction]);
  }

  private party(src: Source): Party {
    if ("node" in src) {
      const n = this.nodes.get(src.node);
      if (!n) throw new Error(`model: no node ${src.node}`);
      return { addresses: n.addresses, node: n.name };
    }
    const p = this.pod(src.pod);
    if (p.hostNetwork) {
      const n = this.nodes.get(p.node);
      return { addresses: [p.ip, ...(n?.addresses ?? [])], node: p.node };
    }
    return { addresses: [p.ip], pod: p, node: p.node };
  }

  private peerMatches(peer: NetworkPolicyPeer, policyNs: string, party: Party): boolean {
    if (peer.ipBlock) {
      const block = peer.ipBlock;
      return party.addresses.some((a) => inIpBlock(block, a));
    }
    const pod = party.pod;
    if (!pod) return false;
    if (peer.namespaceSelector) {
      if (!selects(peer.namespaceSelector, this.namespaceLabels(pod.namespace))) return false;
    } else if (pod.namespace !== policyNs) {
      return false;
    }
    return peer.podSelector === undefined || selects(peer.podSelector, pod.labels);
  }

  /** Whether a rule's port list admits `protocol`/`port` on `dst` (named ports resolve on `dst`). */
  private portMatches(
    ports: readonly NetworkPolicyPort[] | undefined,
    dst: ModelPod,
    protocol: Protocol,
    port: number,
  ) {
    if (!ports || ports.length === 0) return true;
    return ports.some((p) => {
      if ((p.protocol ?? "TCP") !== protocol) return false;
      if (p.port === undefined) return true;
      if (typeof p.port === "string") {
        const declared = dst.ports.find((c) => c.name === p.port && (c.protocol ?? "TCP") === protocol);
        return declared !== undefined && declared.containerPort === port;
      }
      return p.endPort === undefined ? p.port === port : port >= p.port && port <= p.endPort;
    });
  }

  private ingressAllows(dst: ModelPod, from: Party, protocol: Protocol, port: number): boolean {
    const policies = this.selecting(dst).filter((pol) => policyTypes(pol).ingress);
    if (policies.length === 0) return true;
    if (from.node === dst.node && !from.pod) return true;
    return policies.some((pol) =>
      (pol.spec.ingress ?? []).some(
        (rule) =>
          (!rule.from ||
            rule.from.length === 0 ||
            rule.from.some((peer) => this.peerMatches(peer, dst.namespace, from))) &&
          this.portMatches(rule.ports, dst, protocol, port),
      ),
    );
  }

  private egressAllows(src: ModelPod, to: ModelPod, protocol: Protocol, port: number): boolean {
    const policies = this.selecting(src).filter((pol) => policyTypes(pol).egress);
    if (policies.length === 0) return true;
    const toParty: Party = { addresses: [to.ip], pod: to, node: to.node };
    return policies.some((pol) =>
      (pol.spec.egress ?? []).some(
        (rule) =>
          (!rule.to ||
            rule.to.length === 0 ||
            rule.to.some((peer) => this.peerMatches(peer, src.namespace, toParty))) &&
          this.portMatches(rule.ports, to, protocol, port),
      ),
    );
  }

  /** Whether a new connection from `from` to pod `to` on `protocol`/`port` is allowed. */
  allowed(from: Source, to: string, protocol: Protocol, port: number): boolean {
    const dst = this.pod(to);
    if (dst.hostNetwork)
      throw new Error(`model: ${to} is hostNetwork; only pod-network destinations are modelled`);
    if ("pod" in from && from.pod === to) return true;
    const party = this.party(from);
    if (party.pod && !this.egressAllows(party.pod, dst, protocol, port)) return false;
    return this.ingressAllows(dst, party, protocol, port);
  }
}
