// What the three NetworkPolicy reconcilers share: every policy parsed once per change (with the problem that kept
// it from being realized, if any), which shared peers each refers to (the reference counts of the peer address
// sets), and the slim policy view of a pod with its addresses as NB holds them on its port. Kept current by the
// policy informer's handlers; the reconcilers only read it.

import { type Family, formatIp, type IpAddress } from "../ipam/address.ts";
import { portIps } from "../ipam/lsp-addresses.ts";
import type { Informer } from "../k8s/informer.ts";
import { type DesiredRow, findOwned } from "../ovn/nb-diff.ts";
import { CONTROLLER, KIND_KEY, OWNER_KEY, ownedIds, SERVICE_SNAT_IP_KEY } from "../ovn/ownership.ts";
import { podPortId } from "../ovn/pod-port.ts";
import { mgmtPortName } from "../ovn/topology.ts";
import type { OvsdbClient } from "../ovsdb/client.ts";
import type { NbTables } from "../ovsdb/models/nb.generated.ts";
import { nodeRows as isolationNodeRows } from "../policy/isolation-acls.ts";
import {
  EVERYTHING,
  type LabelSelector,
  parseLabelSelector,
  selectorMatches,
} from "../policy/label-selector.ts";
import { podPortGroupIds } from "../policy/membership.ts";
import { nodeGroupId, PEER_KEY, peerSetId, peerSetName, policyGroupId } from "../policy/nb-names.ts";
import {
  type PodPeer,
  type PolicyModel,
  type Protocol,
  parseNetworkPolicy,
  podPeersOf,
} from "../policy/policy-model.ts";
import { type NamedPort, type PolicyPod, peerSelects } from "../policy/selection.ts";
import { BY_NAMESPACE, type NamespaceLite, type NetworkPolicyObject, type PodLite } from "./informers.ts";
import type { AddressHolders } from "./pod-port-allocator.ts";

/** How long a policy's rows may take to land in NB before it isolates its pods anyway. */
export const LAND_DEADLINE_MS = 30_000;

export interface PolicyEntry {
  readonly model: PolicyModel;
  /** Set when the policy as written cannot be realized: `model` is then its isolation alone (nothing allowed). */
  readonly problem?: { field: string; message: string };
  readonly peers: ReadonlyMap<string, PodPeer>;
  /** Names of named ports its egress rules use (a pod declaring one may change the policy's rows). */
  readonly egressPortNames: ReadonlySet<string>;
  readonly hasIngressBlocks: boolean;
}

const PROTOCOLS: Record<string, Protocol> = { TCP: "tcp", UDP: "udp", SCTP: "sctp" };

/** The policy view of a pod, or undefined for one that can be in no policy (gone, host network, not scheduled). */
export function policyPod(p: PodLite | undefined): PolicyPod | undefined {
  if (!p || p.spec.hostNetwork) return undefined;
  const namedPorts: NamedPort[] = [];
  for (const n of p.spec.namedPorts ?? []) {
    const protocol = PROTOCOLS[n.protocol];
    if (protocol && Number.isInteger(n.port) && n.port >= 1 && n.port <= 65535)
      namedPorts.push({ name: n.name, protocol, port: n.port });
  }
  return { namespace: p.metadata.namespace, labels: p.metadata.labels ?? {}, hostNetwork: false, namedPorts };
}

/**
 * Falls back to isolation alone: the directions the policy isolates, with no rule (nothing allowed); a podSelector
 * that cannot be read selects every pod of the namespace.
 */
function isolationOnly(obj: NetworkPolicyObject): PolicyModel | undefined {
  const namespace = obj.metadata?.namespace;
  const name = obj.metadata?.name;
  if (!namespace || !name) return undefined;
  let podSelector: LabelSelector;
  try {
    podSelector = parseLabelSelector(obj.spec?.podSelector, "spec.podSelector");
  } catch {
    // Which pods it meant cannot be known: it isolates them all (nothing it could have allowed is opened).
    podSelector = EVERYTHING;
  }
  const types = obj.spec?.policyTypes;
  const listed = Array.isArray(types) && types.length > 0;
  const ingress = listed ? types.includes("Ingress") : true;
  const egress = listed ? types.includes("Egress") : (obj.spec?.egress?.length ?? 0) > 0;
  return {
    namespace,
    name,
    key: `${namespace}/${name}`,
    podSelector,
    ...(ingress ? { ingress: [] } : {}),
    ...(egress ? { egress: [] } : {}),
  };
}

/** The text of the Warning Event NetworkPolicyNotRealized: the field refused, and what is realized instead. */
export function notRealizedMessage(problem: { field: string; message: string }): string {
  const what = problem.field.startsWith("spec.podSelector")
    ? "its podSelector cannot be read, so every pod of the namespace is isolated with nothing allowed"
    : "the pods it selects are isolated with nothing allowed";
  return `${problem.field}: ${problem.message}; ${what}`;
}

/** A policy as the reconcilers use it; an unrealizable one becomes its isolation alone, with the problem. */
export function policyEntry(obj: NetworkPolicyObject): PolicyEntry | undefined {
  let model: PolicyModel | undefined;
  let problem: PolicyEntry["problem"];
  try {
    model = parseNetworkPolicy(obj);
  } catch (e) {
    const p = (e as { problem?: { field: string; message: string } }).problem;
    problem = p ?? { field: "", message: String(e) };
    model = isolationOnly(obj);
  }
  if (!model) return undefined;
  const egressPortNames = new Set<string>();
  for (const r of model.egress ?? [])
    if (r.ports !== "all") for (const p of r.ports) if (p.kind === "named") egressPortNames.add(p.name);
  const hasIngressBlocks = (model.ingress ?? []).some(
    (r) => r.peers !== "all" && r.peers.some((p) => p.kind === "ipBlock"),
  );
  return {
    model,
    ...(problem ? { problem } : {}),
    peers: podPeersOf(model),
    egressPortNames,
    hasIngressBlocks,
  };
}

export class PolicyIndex {
  private readonly entries = new Map<string, PolicyEntry>();
  /** When each policy was first seen (ms): one whose rows never land isolates anyway after LAND_DEADLINE_MS. */
  private readonly firstSeen = new Map<string, number>();
  /** Namespace → its policies' entries: pod events look only at their namespace's policies. */
  private readonly byNamespace = new Map<string, Map<string, PolicyEntry>>();
  /** Peer key → the policies referring to it. */
  private readonly refs = new Map<string, { peer: PodPeer; policies: Set<string> }>();

  constructor(
    private readonly nb: OvsdbClient<NbTables>,
    private readonly policies: Informer<NetworkPolicyObject>,
    private readonly pods: Informer<PodLite>,
    private readonly namespaces: Informer<NamespaceLite>,
  ) {}

  /** Re-reads one policy from the informer; returns the peer keys whose references changed. */
  refresh(key: string): string[] {
    const old = this.entries.get(key);
    const obj = this.policies.get(key);
    const now = obj ? policyEntry(obj) : undefined;
    const ns = key.slice(0, key.indexOf("/"));
    const inNs = this.byNamespace.get(ns) ?? new Map<string, PolicyEntry>();
    if (now) {
      if (!this.firstSeen.has(key)) this.firstSeen.set(key, Date.now());
      this.entries.set(key, now);
      inNs.set(key, now);
      this.byNamespace.set(ns, inNs);
    } else {
      this.firstSeen.delete(key);
      this.entries.delete(key);
      inNs.delete(key);
      if (inNs.size === 0) this.byNamespace.delete(ns);
    }
    const touched = new Set<string>();
    for (const k of old?.peers.keys() ?? []) {
      if (now?.peers.has(k)) continue;
      const r = this.refs.get(k);
      r?.policies.delete(key);
      if (r && r.policies.size === 0) this.refs.delete(k);
      touched.add(k);
    }
    for (const [k, peer] of now?.peers ?? []) {
      const r = this.refs.get(k) ?? { peer, policies: new Set<string>() };
      if (!r.policies.has(key)) touched.add(k);
      r.policies.add(key);
      this.refs.set(k, r);
    }
    return [...touched];
  }

  get(key: string): PolicyEntry | undefined {
    return this.entries.get(key);
  }

  all(): IterableIterator<[string, PolicyEntry]> {
    return this.entries.entries();
  }

  /** How many policies there are: with none, a pod's change concerns no policy at all. */
  get size(): number {
    return this.entries.size;
  }

  /** Whether any policy lives in the namespace (no array built, unlike inNamespace). */
  hasPoliciesIn(ns: string): boolean {
    return this.byNamespace.has(ns);
  }

  /** How many peers the policies refer to. */
  get peerCount(): number {
    return this.refs.size;
  }

  inNamespace(ns: string): PolicyEntry[] {
    return [...(this.byNamespace.get(ns)?.values() ?? [])];
  }

  peer(key: string): PodPeer | undefined {
    return this.refs.get(key)?.peer;
  }

  peerKeys(): IterableIterator<string> {
    return this.refs.keys();
  }

  peerEntries(): IterableIterator<[string, { peer: PodPeer; policies: Set<string> }]> {
    return this.refs.entries();
  }

  namespaceLabels(ns: string): Readonly<Record<string, string>> | undefined {
    const n = this.namespaces.get(ns);
    return n ? (n.metadata.labels ?? {}) : undefined;
  }

  /** The pod's port in NB: its UUID and addresses (what the controller assigned, not what the pod claims). */
  podPort(p: PodLite): { uuid: string; ips: readonly IpAddress[] } | undefined {
    const lsp = findOwned(
      this.nb.cache as never,
      "Logical_Switch_Port",
      podPortId(p.metadata.namespace, p.metadata.name),
    );
    if (!lsp) return undefined;
    return { uuid: lsp._uuid, ips: lspIps(lsp as unknown as NbTables["Logical_Switch_Port"]) };
  }

  /**
   * Whether the policy's own rows are in NB as the cache shows them: its group, written in one transaction with
   * its allow ACLs. Only such a policy isolates a pod, so none is cut off from what a policy allows before the
   * allow is there.
   */
  landed(policyKey: string): boolean {
    if (findOwned(this.nb.cache as never, "Port_Group", policyGroupId(policyKey)) !== undefined) return true;
    // A policy whose write keeps failing must not leave its pods open for ever: past the deadline it isolates
    // without its allows (fail closed), as a policy that cannot be realized does.
    const seen = this.firstSeen.get(policyKey);
    return seen !== undefined && Date.now() - seen >= LAND_DEADLINE_MS;
  }

  /** Milliseconds until the first policy not yet in NB isolates anyway; undefined when none is waiting. */
  nextLandingDeadline(): number | undefined {
    let next: number | undefined;
    const now = Date.now();
    for (const [key, seen] of this.firstSeen) {
      const left = seen + LAND_DEADLINE_MS - now;
      if (left <= 0 || findOwned(this.nb.cache as never, "Port_Group", policyGroupId(key))) continue;
      next = next === undefined ? left : Math.min(next, left);
    }
    return next;
  }

  /**
   * The port groups the pod's port belongs to (ids), by the same selection the policy reconcilers apply,
   * counting the policies that have landed (the isolation reconciler adds the port when another lands).
   */
  portGroupsOf(p: PodLite): string[] {
    return podPortGroupIds(
      this.inNamespace(p.metadata.namespace)
        .filter((e) => this.landed(e.model.key))
        .map((e) => e.model),
      policyPod(p),
      p.spec.nodeName,
    );
  }

  /**
   * The rows that create the pod's own-node group with its allow, for its port's transaction to create when NB
   * does not hold the group yet (none when the pod is not ingress-isolated or not scheduled).
   */
  portGroupRowsOf(p: PodLite, groups: readonly string[]): DesiredRow[] {
    const node = p.spec.nodeName;
    return node && groups.includes(nodeGroupId(node)) ? isolationNodeRows(node, this.mgmtIps(node)) : [];
  }

  podsIn(ns: string): PodLite[] {
    return this.pods.byIndex(BY_NAMESPACE, ns);
  }

  allPods(): PodLite[] {
    return this.pods.list();
  }

  /** The addresses of the pods a peer covers (no host-network pod, none without a port). */
  peerAddresses(peer: PodPeer): IpAddress[] {
    const namespaces =
      "name" in peer.namespaces
        ? [peer.namespaces.name]
        : this.namespaces
            .list()
            .filter((n) =>
              selectorMatches((peer.namespaces as { selector: LabelSelector }).selector, n.metadata.labels),
            )
            .map((n) => n.metadata.name);
    const out: IpAddress[] = [];
    for (const ns of namespaces) {
      const labels = this.namespaceLabels(ns);
      for (const p of this.podsIn(ns)) {
        const pp = policyPod(p);
        if (!pp || !peerSelects(peer, pp, labels)) continue;
        out.push(...(this.podPort(p)?.ips ?? []));
      }
    }
    return out;
  }

  /**
   * A node's management IPs, from its management port in NB: the node's own sources. Its service SNAT address
   * (the source of Service connections that entered the node from elsewhere) is left out, so neither the
   * own-node allow nor an ipBlock expansion admits those.
   */
  mgmtIps(node: string): IpAddress[] {
    const lsp = this.nb.cache.table("Logical_Switch_Port").lookupOne("name", mgmtPortName(node));
    if (!lsp) return [];
    return ownNodeIps(lsp);
  }
}

const POD_ADDRESS_SET_KINDS = new Set(["network-policy-peer", "network-policy-named"]);
const POD_ADDRESS_INDEX = "zstack.io/np-pod-address";

/**
 * Which of our NetworkPolicy peer and named-port sets hold given addresses (by a cache index on their members,
 * no scan): what the pod port allocator takes out when it frees or hands out an address.
 */
export function policyAddressHolders(nb: OvsdbClient<NbTables>): AddressHolders {
  return (ips) => {
    const table = nb.cache.table("Address_Set");
    if (!table.hasIndex(POD_ADDRESS_INDEX))
      table.addIndex(POD_ADDRESS_INDEX, (r) =>
        r.external_ids[OWNER_KEY] === CONTROLLER && POD_ADDRESS_SET_KINDS.has(r.external_ids[KIND_KEY] ?? "")
          ? r.addresses
          : undefined,
      );
    const out = new Map<string, string[]>();
    for (const ip of new Set(ips))
      for (const r of table.lookup(POD_ADDRESS_INDEX, ip))
        out.set(r._uuid, [...(out.get(r._uuid) ?? []), ip]);
    return out;
  };
}

/** The addresses of a management port that are the node's own sources: all but its service SNAT address. */
export function ownNodeIps(lsp: {
  readonly addresses: readonly string[];
  readonly external_ids: Readonly<Record<string, string>>;
}): IpAddress[] {
  const snat = lsp.external_ids[SERVICE_SNAT_IP_KEY];
  return portIps(lsp.addresses).ips.filter((ip) => formatIp(ip) !== snat);
}

/**
 * A port's addresses, parsed once per row version: cache rows are immutable and a change replaces the row
 * object, so a row object always has the same addresses. Peer sets and isolation groups read every pod's port
 * on each reconcile; parsing the text each time was most of the controller's CPU at 1,000 policies
 * (make bench-policy --profile).
 */
const parsedIps = new WeakMap<object, IpAddress[]>();
export function lspIps(row: { readonly addresses: readonly string[] }): readonly IpAddress[] {
  let ips = parsedIps.get(row);
  if (!ips) {
    ips = portIps(row.addresses as string[]).ips;
    parsedIps.set(row, ips);
  }
  return ips;
}

/** The desired rows of a peer's address sets, one per cluster family. */
export function peerSetRows(
  idx: PolicyIndex,
  key: string,
  peer: PodPeer,
  families: readonly Family[],
): { name: string; addresses: string[]; external_ids: Record<string, string> }[] {
  const ips = idx.peerAddresses(peer);
  return families.map((f) => {
    const name = peerSetName(key, f);
    return {
      name,
      addresses: [...new Set(ips.filter((ip) => ip.family === f).map(formatIp))].sort(),
      external_ids: ownedIds("network-policy-peer", peerSetId(name), { [PEER_KEY]: key }),
    };
  });
}
