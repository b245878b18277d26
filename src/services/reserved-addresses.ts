// Addresses a Service may not claim as an externalIP: every node's own addresses and the API server's. A VIP
// there takes that address's port from everyone who connects to it (pods through OVN, nodes and outside clients
// through the node agent's nftables): an externalIP of a node's address on port 22 or 10250 would receive the
// node's SSH or the kubelet's traffic, one of the API server's address on 6443 would cut every kubelet (and the
// node agent itself) off the API. Computed from objects both the controller and the node agent follow.

import type { V1EndpointSlice } from "@kubernetes/client-node";
import { formatIp, type IpAddress, tryParseIp } from "../ipam/address.ts";

export interface ReservedAddresses {
  /** Every address any Node reports (InternalIP, ExternalIP...). */
  readonly nodeAddresses: readonly IpAddress[];
  /** The endpoints of the `default/kubernetes` Service: the API server's own addresses. */
  readonly apiServerAddresses: readonly IpAddress[];
}

interface NodeAddresses {
  status?: { addresses?: readonly { address?: unknown }[] };
}

/** The namespace and name of the Service whose endpoints are the API server. */
export const API_SERVER_SERVICE = { namespace: "default", name: "kubernetes" } as const;

function unique(ips: Iterable<IpAddress>): IpAddress[] {
  const seen = new Map<string, IpAddress>();
  for (const ip of ips) seen.set(`${ip.family}/${formatIp(ip)}`, ip);
  return [...seen.values()];
}

export function reservedAddresses(
  nodes: readonly NodeAddresses[],
  apiServerSlices: readonly V1EndpointSlice[],
  /** Addresses known otherwise (the agent's own node, the API server its kubeconfig names). */
  extra: Partial<ReservedAddresses> = {},
): ReservedAddresses {
  const nodeAddresses: IpAddress[] = [...(extra.nodeAddresses ?? [])];
  for (const n of nodes)
    for (const a of n.status?.addresses ?? []) {
      const ip = typeof a.address === "string" ? tryParseIp(a.address) : undefined;
      if (ip) nodeAddresses.push(ip);
    }
  const api: IpAddress[] = [...(extra.apiServerAddresses ?? [])];
  for (const s of apiServerSlices)
    for (const e of s.endpoints ?? [])
      for (const text of e.addresses ?? []) {
        const ip = typeof text === "string" ? tryParseIp(text) : undefined;
        if (ip) api.push(ip);
      }
  return { nodeAddresses: unique(nodeAddresses), apiServerAddresses: unique(api) };
}
