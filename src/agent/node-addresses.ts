// The addresses the Node object reports (status.addresses). Anyone who can update the Node's status writes
// them, and the InternalIP becomes the tunnel endpoint in OVSDB and the SNAT address in the nft script, so
// each is parsed into an address here and the node's own addresses are never carried as raw text.

import { formatIp, type IpAddress, parseIp, tryParseIp } from "../ipam/address.ts";
import { InvalidInputError } from "../ipam/problem.ts";

export interface NodeStatusAddresses {
  status?: { addresses?: readonly { type?: unknown; address?: unknown }[] };
}

export class NodeAddressError extends Error {
  override name = "NodeAddressError";
}

/**
 * The tunnel endpoint: the configured one, else the Node's first InternalIP.
 * @throws NodeAddressError when the Node reports none, or one that is not an IP address
 */
export function encapIpOf(configured: string, nodeName: string, node: NodeStatusAddresses): IpAddress {
  if (configured) return parseIp(configured, "node.encapIp");
  const entry = (node.status?.addresses ?? []).find((a) => a.type === "InternalIP");
  if (entry === undefined)
    throw new NodeAddressError(`node ${nodeName} reports no InternalIP; set ZSTACK_ENCAP_IP`);
  const text = entry.address;
  try {
    if (typeof text !== "string") throw new InvalidInputError("InternalIP", "is not a string");
    return parseIp(text, "InternalIP");
  } catch (e) {
    if (!(e instanceof InvalidInputError)) throw e;
    const shown = typeof text === "string" ? JSON.stringify(text.slice(0, 80)) : typeof text;
    throw new NodeAddressError(
      `node ${nodeName} reports InternalIP ${shown}, which is not an IP address (${e.message}); ` +
        "fix the Node's status or set ZSTACK_ENCAP_IP",
    );
  }
}

/** Every address the Node reports that is an IP address (host names and junk are left out), each once. */
export function nodeReportedIps(node: NodeStatusAddresses): IpAddress[] {
  const seen = new Set<string>();
  const out: IpAddress[] = [];
  for (const a of node.status?.addresses ?? []) {
    const ip = typeof a.address === "string" ? tryParseIp(a.address) : undefined;
    if (!ip || seen.has(formatIp(ip))) continue;
    seen.add(formatIp(ip));
    out.push(ip);
  }
  return out;
}

/** The Node's InternalIPs that are IP addresses, each once: the addresses NodePorts answer on. */
export function nodeInternalIps(node: NodeStatusAddresses): IpAddress[] {
  return nodeReportedIps({
    status: { addresses: (node.status?.addresses ?? []).filter((a) => a.type === "InternalIP") },
  });
}
