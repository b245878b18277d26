// Which of a Node's own addresses the cluster router may return to that node's management port (its reply
// policy, topology.ts nodeReplyMatch). A Node object is hostile input: whoever can write its status could claim
// another node's address (and receive that node's replies), or a pod, Service or join address (and capture the
// cluster's own traffic). Only an InternalIP that is a plain unicast IPv4 address, outside every range the
// cluster routes itself, and claimed by no other Node is accepted; every other one is refused with its field.

import { type IpAddress, ipEquals, tryParseIp } from "../ipam/address.ts";
import { type Cidr, cidrContains, formatCidr } from "../ipam/cidr.ts";
import { NODE_REPLY_IPS_MAX } from "../ovn/topology.ts";

export interface NodeAddressesLite {
  readonly name: string;
  readonly addresses?: readonly { readonly type?: unknown; readonly address?: unknown }[] | undefined;
}

export interface RefusedNodeAddress {
  /** The field, e.g. `status.addresses[1]`. */
  readonly field: string;
  readonly address: string;
  readonly reason: string;
}

export interface NodeReplyAddresses {
  /** Sorted by value, each once, at most NODE_REPLY_IPS_MAX (the first ones). */
  readonly accepted: readonly IpAddress[];
  readonly refused: readonly RefusedNodeAddress[];
}

const V4 = (a: number, b: number, c: number, d: number): bigint =>
  (BigInt(a) << 24n) | (BigInt(b) << 16n) | (BigInt(c) << 8n) | BigInt(d);
const v4Net = (network: bigint, prefix: number): Cidr => ({ family: 4, network, prefix });
/** Addresses that are never one host's own on a network: unspecified, loopback, link-local, multicast, reserved. */
const NOT_A_HOST: readonly { cidr: Cidr; what: string }[] = [
  { cidr: v4Net(V4(0, 0, 0, 0), 8), what: "an unspecified (0.0.0.0/8) address" },
  { cidr: v4Net(V4(127, 0, 0, 0), 8), what: "a loopback address" },
  { cidr: v4Net(V4(169, 254, 0, 0), 16), what: "a link-local address" },
  { cidr: v4Net(V4(224, 0, 0, 0), 4), what: "a multicast address" },
  // With the limited broadcast address 255.255.255.255.
  { cidr: v4Net(V4(240, 0, 0, 0), 4), what: "a reserved (240.0.0.0/4) address" },
];

/** The InternalIPs a Node's status lists, with their field, as written (not parsed yet). */
function internalIps(n: NodeAddressesLite): { field: string; text: string }[] {
  const out: { field: string; text: string }[] = [];
  const list = Array.isArray(n.addresses) ? n.addresses : [];
  for (const [i, a] of list.entries()) {
    if (typeof a !== "object" || a === null || a.type !== "InternalIP") continue;
    out.push({ field: `status.addresses[${i}]`, text: typeof a.address === "string" ? a.address : "" });
  }
  return out;
}

/**
 * The node's IPv4 InternalIPs its reply policy may hold. `inside` holds the ranges the cluster routes itself
 * (cluster, Subnet, service and join CIDRs). An address claimed by two Nodes is refused for both: neither can
 * take the other's replies, and the outcome does not depend on which was seen first. IPv6 InternalIPs are
 * neither accepted nor refused: the cluster router has no IPv6 reroute (the management port has no IPv6
 * address), so such a node keeps masquerading its node-local IPv6 connections as before.
 */
export function nodeReplyAddresses(
  node: string,
  nodes: Iterable<NodeAddressesLite>,
  inside: readonly Cidr[],
): NodeReplyAddresses {
  const others: IpAddress[] = [];
  let self: NodeAddressesLite | undefined;
  for (const n of nodes) {
    if (n.name === node) {
      self = n;
      continue;
    }
    for (const a of internalIps(n)) {
      const ip = tryParseIp(a.text);
      if (ip) others.push(ip);
    }
  }
  const accepted: { ip: IpAddress; field: string; text: string }[] = [];
  const refused: RefusedNodeAddress[] = [];
  for (const a of self ? internalIps(self) : []) {
    const refuse = (reason: string) => refused.push({ field: a.field, address: a.text, reason });
    const ip = tryParseIp(a.text);
    if (!ip) {
      refuse("is not an IP address");
      continue;
    }
    if (ip.family !== 4) continue;
    const special = NOT_A_HOST.find((r) => cidrContains(r.cidr, ip));
    if (special) {
      refuse(`is ${special.what}`);
      continue;
    }
    const within = inside.find((c) => c.family === 4 && cidrContains(c, ip));
    if (within) {
      refuse(
        `is inside ${formatCidr(within)}, a range the cluster routes itself (pods, Services, join network)`,
      );
      continue;
    }
    if (others.some((o) => ipEquals(o, ip))) {
      refuse("is also another Node's InternalIP");
      continue;
    }
    if (!accepted.some((x) => ipEquals(x.ip, ip))) accepted.push({ ip, field: a.field, text: a.text });
  }
  accepted.sort((x, y) => (x.ip.value < y.ip.value ? -1 : x.ip.value > y.ip.value ? 1 : 0));
  // The agent ignores a longer list; the order makes the cut independent of how the Node lists them.
  for (const a of accepted.slice(NODE_REPLY_IPS_MAX))
    refused.push({
      field: a.field,
      address: a.text,
      reason: `is beyond the first ${NODE_REPLY_IPS_MAX} InternalIPs (in address order) a node's reply policy holds`,
    });
  return { accepted: accepted.slice(0, NODE_REPLY_IPS_MAX).map((a) => a.ip), refused };
}
