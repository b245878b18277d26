// Which pods a policy selects and which pods a peer covers, and what a named port resolves to: plain functions
// over a slim view of pods and namespace labels. Host-network pods are never selected nor peers (their traffic
// is judged by ipBlock on node addresses), and a pod without an address is in no address set.

import type { IpAddress } from "../ipam/address.ts";
import { cidrContains } from "../ipam/cidr.ts";
import { type Labels, selectorMatches } from "./label-selector.ts";
import type { IpBlockPeer, PodPeer, PolicyModel, Protocol } from "./policy-model.ts";

export interface NamedPort {
  readonly name: string;
  readonly protocol: Protocol;
  readonly port: number;
}

export interface PolicyPod {
  readonly namespace: string;
  readonly labels: Labels;
  readonly hostNetwork: boolean;
  readonly namedPorts: readonly NamedPort[];
}

export function policySelects(m: PolicyModel, pod: PolicyPod): boolean {
  return !pod.hostNetwork && pod.namespace === m.namespace && selectorMatches(m.podSelector, pod.labels);
}

export function peerSelects(p: PodPeer, pod: PolicyPod, namespaceLabels: Labels | undefined): boolean {
  if (pod.hostNetwork) return false;
  if ("name" in p.namespaces) {
    if (pod.namespace !== p.namespaces.name) return false;
  } else if (namespaceLabels === undefined || !selectorMatches(p.namespaces.selector, namespaceLabels)) {
    return false;
  }
  return selectorMatches(p.pods, pod.labels);
}

export function blockContains(b: IpBlockPeer, ip: IpAddress): boolean {
  return cidrContains(b.cidr, ip) && !b.except.some((e) => cidrContains(e, ip));
}

/** The number a pod declares for a named port of a protocol, if any (the first container port wins). */
export function namedPortNumber(pod: PolicyPod, name: string, protocol: Protocol): number | undefined {
  return pod.namedPorts.find((p) => p.name === name && p.protocol === protocol)?.port;
}

/** Port number → the addresses of the pods that declare `name` with that number. */
export function resolveNamedPort<P extends PolicyPod>(
  pods: Iterable<P>,
  ipsOf: (pod: P) => readonly IpAddress[],
  name: string,
  protocol: Protocol,
): Map<number, IpAddress[]> {
  const out = new Map<number, IpAddress[]>();
  for (const pod of pods) {
    const n = namedPortNumber(pod, name, protocol);
    if (n === undefined) continue;
    const ips = ipsOf(pod);
    if (ips.length === 0) continue;
    const list = out.get(n) ?? [];
    list.push(...ips);
    out.set(n, list);
  }
  return out;
}
