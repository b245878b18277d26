// What the node's Subnet routes must stay clear of, assembled from the agent's configuration, the Node object
// (rebuilt whenever it changes, as addresses come and go), the API server's address and the host's gateways and
// uplink networks.

import type { IpAddress } from "../ipam/address.ts";
import { tryParseIp } from "../ipam/address.ts";
import type { Cidr } from "../ipam/cidr.ts";
import type { HostAnchors } from "../node/host-network.ts";
import { type NodeStatusAddresses, nodeReportedIps } from "./node-addresses.ts";
import type { RouteGuard } from "./subnet-routes.ts";

/** The API server's address when the kubeconfig names it by IP (a host name is resolved elsewhere, not here). */
export function apiServerIp(server: string | undefined): IpAddress | undefined {
  if (!server) return undefined;
  let host: string;
  try {
    host = new URL(server).hostname;
  } catch {
    return undefined;
  }
  // URL keeps the brackets of an IPv6 literal.
  return tryParseIp(host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host);
}

export interface RouteGuardInputs {
  readonly joinCidr: Cidr;
  readonly serviceCidrs: readonly Cidr[];
  readonly encapIp: IpAddress;
  readonly node: NodeStatusAddresses;
  readonly apiServer?: IpAddress | undefined;
  readonly host?: HostAnchors | undefined;
}

export function routeGuardFor(i: RouteGuardInputs): RouteGuard {
  return {
    joinCidr: i.joinCidr,
    serviceCidrs: i.serviceCidrs,
    nodeIps: [i.encapIp, ...nodeReportedIps(i.node)],
    hostIps: [
      ...(i.apiServer ? [{ ip: i.apiServer, what: "the API server's address" }] : []),
      ...(i.host?.gateways ?? []).map((ip) => ({ ip, what: "the node's default gateway" })),
    ],
    uplinkCidrs: i.host?.uplinkCidrs ?? [],
  };
}
