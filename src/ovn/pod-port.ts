// A pod's logical switch port and the k8s.ovn.org/pod-networks annotation that tells the node agent how to
// wire the pod. The port is named <namespace>_<pod> (the node agent uses the same name as the OVS iface-id);
// the pod UID in external_ids tells a recreated pod of the same name apart from the old one.

import type { DesiredRow, ParentRef } from "./nb-diff.ts";
import { ownedIds, POD_KEY, POD_UID_KEY, STATEFULSET_KEY, SUBNET_KEY } from "./ownership.ts";

export const POD_NETWORKS_ANNOTATION = "k8s.ovn.org/pod-networks";

export interface PodRef {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  /** Name of the owning StatefulSet, if any. */
  readonly statefulSet?: string;
}

export interface PodAddressing {
  readonly subnet: string;
  readonly logicalSwitch: string;
  readonly mac: string;
  /** Addresses with the subnet prefix, e.g. ["10.244.0.5/16", "fd00::5/64"]. */
  readonly ipsWithPrefix: readonly string[];
  readonly gateways: readonly string[];
  /** Node the pod is scheduled to; its chassis is requested for the port. */
  readonly node?: string;
}

export function podPortName(namespace: string, name: string): string {
  return `${namespace}_${name}`;
}

export function podPortId(namespace: string, name: string): string {
  return `pod/${namespace}/${name}`;
}

export function podPortRow(pod: PodRef, a: PodAddressing, parent: ParentRef): DesiredRow {
  const ips = a.ipsWithPrefix.map((c) => c.slice(0, c.indexOf("/")));
  const id = podPortId(pod.namespace, pod.name);
  return {
    table: "Logical_Switch_Port",
    id,
    row: {
      name: podPortName(pod.namespace, pod.name),
      addresses: [`${a.mac} ${ips.join(" ")}`],
      // Port security pins the pod to its own MAC and addresses: no spoofing of a neighbour.
      port_security: [`${a.mac} ${ips.join(" ")}`],
      // iface-id-ver: ovn-controller binds the port only to the OVS interface of this pod incarnation (the node
      // agent sets the same UID there), never to a stale interface an earlier pod of this name left behind.
      options: { ...(a.node ? { "requested-chassis": a.node } : {}), "iface-id-ver": pod.uid },
      external_ids: ownedIds("pod-port", id, {
        [POD_KEY]: `${pod.namespace}/${pod.name}`,
        [POD_UID_KEY]: pod.uid,
        [SUBNET_KEY]: a.subnet,
        ...(pod.statefulSet ? { [STATEFULSET_KEY]: pod.statefulSet } : {}),
      }),
    },
    parent,
  };
}

export interface PodNetworkAnnotation {
  readonly ip_addresses: readonly string[];
  readonly mac_address: string;
  readonly gateway_ips: readonly string[];
  readonly routes: readonly { dest: string; nextHop: string }[];
  readonly logical_switch: string;
}

/** The annotation value: keyed by "default", the pod's primary network. */
export function podNetworksAnnotation(a: PodAddressing): string {
  const value: Record<string, PodNetworkAnnotation> = {
    default: {
      ip_addresses: a.ipsWithPrefix,
      mac_address: a.mac,
      gateway_ips: a.gateways,
      routes: [],
      logical_switch: a.logicalSwitch,
    },
  };
  return JSON.stringify(value);
}

export function parsePodNetworksAnnotation(text: string | undefined): PodNetworkAnnotation | undefined {
  if (!text) return undefined;
  try {
    const v = JSON.parse(text) as Record<string, PodNetworkAnnotation>;
    const d = v.default;
    if (!d || !Array.isArray(d.ip_addresses) || typeof d.mac_address !== "string") return undefined;
    return d;
  } catch {
    return undefined;
  }
}
