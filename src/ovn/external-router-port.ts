// External mode: the cluster router's port on a ZStack switch, and the routes that send a pod on that switch to it.
//
//   pod on ZStack's switch ── default route ──> ZStack's router port (spec.gateway)
//                          └─ join, cluster and service CIDRs ──> zovn-rtoe-<subnet> ── zovn-cluster-router
//
// The pod's default gateway stays ZStack's router; only the cluster's own networks go through ours, so the node
// (via its management port on the join switch) reaches the pod, the pod answers it, reaches pods on our Subnet
// switches and Services. Our router port's address comes from the Subnet's allocator like a pod's, and is then
// held by the row itself (its `networks`), so it never moves; the switch-side port joins ZStack's switch only by a
// `mutate ports insert` of its own reference, exactly as a pod port does. A cluster-router policy drops whatever
// else enters through that port (sourceGuardRows). On a switch with a localnet port (flat, VLAN) the port is
// distributed too: each node's chassis MAC (ovn-chassis-mac-mappings, node agent) replaces its MAC on the wire,
// and the cluster's own traffic crossing the localnet port skips that port's conntrack zone (localnetStatelessRows).

import { createHash } from "node:crypto";
import { formatIp, type IpAddress, parseIp } from "../ipam/address.ts";
import { cidrContains, formatCidr, networkOf, overlaps, parseCidr } from "../ipam/cidr.ts";
import { macFromIPv4 } from "../ipam/mac.ts";
import type { DesiredRow } from "./nb-diff.ts";
import { addressKey, ownedIds, rowUuid, SUBNET_KEY } from "./ownership.ts";
import { EXTERNAL_PODS_ADDRESS_SET_V4, INSIDE_ADDRESS_SET_V4 } from "./topology.ts";

export function externalRouterPortName(subnet: string): string {
  return `zovn-rtoe-${subnet}`;
}
export function externalSwitchPortName(subnet: string): string {
  return `zovn-etor-${subnet}`;
}
/** Ids of the two rows; under `subnet/<name>/`, so the Subnet's scope removes them with it. */
export function externalRouterPortId(subnet: string): string {
  return `subnet/${subnet}/ext-rtoe`;
}
export function externalSwitchPortId(subnet: string): string {
  return `subnet/${subnet}/ext-etor`;
}
export function externalSourceGuardId(subnet: string, family: 4 | 6): string {
  return `subnet/${subnet}/ext-guard-v${family}`;
}
/** The IPv4 guard's allow policy (our pods of the Subnet), just above the guard's drop. */
export function externalSourceAllowId(subnet: string): string {
  return `subnet/${subnet}/ext-guard-v4-allow`;
}

/**
 * Priority of the cluster router's policy that drops what enters through our router port on a ZStack switch from
 * a source not our pod there: above the allow policy for those pods (1005) and every egress reroute (1004), below
 * what an admin adds at 2000+.
 */
export const EXTERNAL_SOURCE_GUARD_PRIORITY = 1010;

export interface ExternalRouterPort {
  readonly subnet: string;
  /** The OVN UUID of ZStack's switch the Subnet is bound to. */
  readonly switchUuid: string;
  /** Our addresses on the switch, one per family of the Subnet, with the Subnet's prefix, e.g. 10.60.0.2/24. */
  readonly networks: readonly string[];
}

/**
 * Our router port on the cluster router and its `router`-type peer on ZStack's switch. The peer carries one
 * `zstack.io/ip/<address>` key per address, as pod ports do: a pod insert waiting on that key cannot take the
 * router port's address, and the router port's insert waiting on it cannot take a pod's.
 */
export function externalRouterPortRows(p: ExternalRouterPort): DesiredRow[] {
  const tag = { [SUBNET_KEY]: p.subnet };
  const ips = p.networks.map((n) => n.slice(0, n.indexOf("/")));
  const rtoe = externalRouterPortName(p.subnet);
  return [
    {
      table: "Logical_Router_Port",
      id: externalRouterPortId(p.subnet),
      row: {
        name: rtoe,
        mac: routerPortMac(ips),
        networks: [...p.networks],
        external_ids: ownedIds("router-port", externalRouterPortId(p.subnet), tag),
      },
      parent: { table: "Logical_Router", id: "cluster-router", column: "ports" },
    },
    {
      table: "Logical_Switch_Port",
      id: externalSwitchPortId(p.subnet),
      row: {
        name: externalSwitchPortName(p.subnet),
        type: "router",
        addresses: ["router"],
        options: { "router-port": rtoe },
        external_ids: ownedIds("switch-router-port", externalSwitchPortId(p.subnet), {
          ...tag,
          ...Object.fromEntries(ips.map((ip) => [addressKey(ip), p.subnet])),
        }),
      },
      // ZStack's switch: joined by a mutate inserting this row's reference only, never a rewrite of its ports.
      parent: { table: "Logical_Switch", uuid: p.switchUuid, column: "ports" },
    },
    ...p.networks.flatMap((n) => sourceGuardRows(p.subnet, rtoe, n)),
  ];
}

/**
 * The router port is a door from ZStack's switch into the cluster router: only our pods on that switch go
 * through it (their routes to the join, cluster and service CIDRs). Anything else entering there is dropped
 * before routing: a VM that routes the join CIDR via our port (it would reach the nodes' management addresses),
 * a VM using our router to reach another ZStack network (a second switch with a router port of ours), a packet
 * forging a node's address. IPv4 must come from an address in the external pods' set and in this Subnet's CIDR;
 * IPv6 (no per-pod set) from this Subnet's CIDR. Written and removed with the router port, in its plan.
 */
function sourceGuardRows(subnet: string, rtoe: string, network: string): DesiredRow[] {
  const cidr = formatCidr(networkOf(network));
  const family = cidr.includes(":") ? 6 : 4;
  const policy = (id: string, priority: number, match: string, action: "allow" | "drop"): DesiredRow => ({
    table: "Logical_Router_Policy",
    id,
    row: {
      priority,
      match,
      action,
      external_ids: ownedIds("external-source-guard", id, { [SUBNET_KEY]: subnet }),
    },
    parent: { table: "Logical_Router", id: "cluster-router", column: "policies" },
  });
  const guardId = externalSourceGuardId(subnet, family);
  if (family === 6)
    return [
      policy(
        guardId,
        EXTERNAL_SOURCE_GUARD_PRIORITY,
        `inport == "${rtoe}" && ip6 && !(ip6.src == ${cidr})`,
        "drop",
      ),
    ];
  // IPv4: allow our pods, then drop the rest. Never a negated address set in one match (`!(ip4.src == $set)`):
  // ovn-controller expands it into the product of every member's mismatching bits, which grows exponentially with
  // the set (with 4 pods on ZStack's switches, a recompute took 18 s and 800 MB).
  return [
    policy(
      externalSourceAllowId(subnet),
      EXTERNAL_SOURCE_GUARD_PRIORITY + 1,
      `inport == "${rtoe}" && ip4.src == $${EXTERNAL_PODS_ADDRESS_SET_V4} && ip4.src == ${cidr}`,
      "allow",
    ),
    policy(guardId, EXTERNAL_SOURCE_GUARD_PRIORITY, `inport == "${rtoe}" && ip4`, "drop"),
  ];
}

/** Id of the Subnet's port group holding the localnet port(s) of ZStack's switch; its two ACLs' ids follow it. */
export function externalLocalnetGroupId(subnet: string): string {
  return `subnet/${subnet}/ext-localnet`;
}
/** Its name: `@name` in an ACL match, so letters, digits and `_` only (a hash of the Subnet's name). */
export function externalLocalnetGroupName(subnet: string): string {
  return `zovn_ln_${createHash("sha256").update(subnet).digest("hex").slice(0, 16)}`;
}
/**
 * Priority of the two allow-stateless ACLs on ZStack's localnet port: the lowest, so any ACL of ZStack's that
 * matches the same packets (a drop, a reject) still decides them; ours only keeps them out of conntrack.
 */
export const EXTERNAL_LOCALNET_STATELESS_PRIORITY = 0;
/**
 * Priority of the drop ACL that keeps the physical network from reaching our router port through the localnet port
 * (its ARP/ND and frames addressed to its MAC): high, since nothing else has a reason to match them.
 */
export const EXTERNAL_LOCALNET_ROUTER_GUARD_PRIORITY = 32_100;

/**
 * Whether the NB server's schema has the ACL action `allow-stateless` (ZStack's OVN decides; 23.03 has it). Without
 * it the localnet group's ACLs cannot be written: the router port goes without them (node -> pod works, answers
 * routed back through another node's localnet port do not).
 */
export function supportsStatelessAcl(schema: {
  readonly tables: ReadonlyMap<
    string,
    {
      readonly columns: ReadonlyMap<
        string,
        { readonly type: { readonly key: { readonly enum?: readonly unknown[] } } }
      >;
    }
  >;
}): boolean {
  return schema.tables.get("ACL")?.columns.get("action")?.type.key.enum?.includes("allow-stateless") ?? false;
}

/**
 * The group of ours holding the localnet ports of a flat/VLAN switch our router port is on, and its three ACLs.
 *
 * Stateless, both directions, every IP packet. Routing through our distributed router port is asymmetric across
 * nodes: a flat pod on node A reaching node B (or a Service backend on B) goes pod -> our router port on A -> tunnel
 * -> B; B's answer is routed on B back onto the flat switch and leaves through B's localnet port, over the wire,
 * into A's localnet port. A switch with a load balancer (ours: the cluster-IP group) sends what crosses its
 * localnet port through that port's conntrack zone (ovn-northd leaves localnet ports out of conntrack only on
 * switches without load balancers), and a zone that sees a SYN-ACK whose SYN went through a tunnel marks it
 * invalid: ls_out_acl's `ct.inv` flow dropped every such answer (OVN 23.03; ovs-appctl dpctl/dump-flows on B showed
 * ct(zone=<localnet's>,nat) then ct_state(+inv+trk) -> drop). So every IP packet crosses the localnet port without
 * conntrack, as it did before our load-balancer group was linked to the switch: ZStack's own asymmetric routes
 * across localnet ports (its own distributed router ports on VLAN networks) keep working, and a packet from the
 * physical network to a cluster IP is not DNATed by our group at the localnet port (cluster IPs are the cluster's,
 * not ZStack's network's). The pods' and VMs' own ports still track their connections (and un-NAT a Service's
 * answer) in their own zones.
 *
 * A drop for what the physical network sends to our router port: ARP requests for its IPv4 address, neighbor
 * solicitations for its IPv6 address, and IP frames addressed to its MAC. Every chassis bound to the switch runs
 * the cluster router's pipeline for it, ZStack's hypervisors too, which have no chassis MAC of ours: without this,
 * each would answer an ARP from the wire with the router port's own MAC from its own uplink, and ZStack's
 * physical switches would see that MAC move between hypervisors. Nothing of ours needs it: a pod asks for the
 * router port on its own chassis (not through the localnet port), and routed frames carry a chassis MAC as source
 * and the destination's MAC. ARP replies addressed to the router port's MAC still pass (the answer to a node
 * routing to a host on the physical network).
 *
 * The group holds ZStack's localnet ports by reference only (a weak reference in a row of ours; ZStack's rows are
 * not changed), written whole: a port ZStack removes leaves it by itself, one that stops being a localnet port
 * (or moves to another switch) is taken out, and the next reconcile adds a new one.
 */
export function localnetStatelessRows(
  subnet: string,
  localnetPorts: readonly string[],
  routerNetworks: readonly string[],
  opts: {
    /**
     * ZStack's switch has load balancers of its own (rows or groups not ours): its localnet port went through
     * conntrack before we came, for them, so only the cluster's own traffic skips it (sources in the inside set, and
     * these IPv6 CIDRs literally), and a client on the physical network still reaches ZStack's VIPs.
     */
    readonly onlyInside6?: readonly string[];
  } = {},
): DesiredRow[] {
  if (localnetPorts.length === 0) return [];
  const tag = { [SUBNET_KEY]: subnet };
  const id = externalLocalnetGroupId(subnet);
  const name = externalLocalnetGroupName(subnet);
  const ips = routerNetworks.map((n) => parseIp(n.slice(0, n.indexOf("/"))));
  const mac = routerPortMac(routerNetworks.map((n) => n.slice(0, n.indexOf("/"))));
  // What the physical network must not send to our router port: a request for its address, an answer or
  // announcement claiming its address with another MAC (which would take the flat pods' cluster traffic), and IP
  // frames to its MAC. Our routers' own ARP requests name its address with its MAC as sender and still pass.
  const toRouter = [
    ...ips
      .filter((ip) => ip.family === 4)
      .flatMap((ip) => [
        `(arp.op == 1 && arp.tpa == ${formatIp(ip)})`,
        `(arp.spa == ${formatIp(ip)} && arp.sha != ${mac})`,
      ]),
    ...ips
      .filter((ip) => ip.family === 6)
      .flatMap((ip) => [
        `(nd_ns && nd.target == ${formatIp(ip)})`,
        `(nd_na && nd.target == ${formatIp(ip)} && nd.tll != ${mac})`,
      ]),
    `(ip && eth.dst == ${mac})`,
  ];
  let stateless = "ip";
  if (opts.onlyInside6 !== undefined) {
    const v6 = [...new Set(opts.onlyInside6.map((c) => formatCidr(parseCidr(c))))].filter((c) =>
      c.includes(":"),
    );
    stateless =
      v6.length > 0
        ? `(ip4.src == $${INSIDE_ADDRESS_SET_V4} || ip6.src == {${v6.join(", ")}})`
        : `ip4.src == $${INSIDE_ADDRESS_SET_V4}`;
  }
  const acl = (
    suffix: string,
    direction: "from-lport" | "to-lport",
    priority: number,
    action: "allow-stateless" | "drop",
    match: string,
  ): DesiredRow => ({
    table: "ACL",
    id: `${id}/${suffix}`,
    row: {
      direction,
      priority,
      action,
      match,
      external_ids: ownedIds("external-localnet-acl", `${id}/${suffix}`, tag),
    },
    parent: { table: "Port_Group", id, column: "acls" },
    uuid: rowUuid("external-localnet-acl", `${id}/${suffix}`),
  });
  return [
    {
      table: "Port_Group",
      id,
      row: {
        name,
        ports: [...new Set(localnetPorts)].sort(),
        external_ids: ownedIds("external-localnet-group", id, tag),
      },
      uuid: rowUuid("external-localnet-group", id),
    },
    acl(
      "from-lport",
      "from-lport",
      EXTERNAL_LOCALNET_STATELESS_PRIORITY,
      "allow-stateless",
      `inport == @${name} && ${stateless}`,
    ),
    acl(
      "to-lport",
      "to-lport",
      EXTERNAL_LOCALNET_STATELESS_PRIORITY,
      "allow-stateless",
      `outport == @${name} && ${stateless}`,
    ),
    acl(
      "router-guard",
      "from-lport",
      EXTERNAL_LOCALNET_ROUTER_GUARD_PRIORITY,
      "drop",
      `inport == @${name} && (${toRouter.join(" || ")})`,
    ),
  ];
}

/** 0a:58 + the IPv4 address, as our other ports; without one, from a hash of the addresses (stable, not random). */
function routerPortMac(ips: readonly string[]): string {
  const v4 = ips.map((ip) => parseIp(ip)).find((ip) => ip.family === 4);
  if (v4) return macFromIPv4(v4);
  const h = createHash("sha256").update(ips.join(",")).digest();
  return ["0a", "58", ...[...h.subarray(0, 4)].map((b) => b.toString(16).padStart(2, "0"))].join(":");
}

export interface ClusterRouteTargets {
  readonly joinCIDR: string;
  readonly clusterCIDRs: readonly string[];
  readonly serviceCIDRs: readonly string[];
}

export interface PodRouteText {
  readonly dest: string;
  readonly nextHop: string;
}

/**
 * The routes a pod on ZStack's switch gets: the join, cluster and service CIDRs via our router port's address of
 * the same family. A CIDR overlapping the pod's own network is left out (the pod's on-link route must stay), as
 * is a family the router port has no address in. Join first, then cluster, then service; each CIDR once.
 */
export function externalPodRoutes(
  routerIps: readonly string[],
  podCidrs: readonly string[],
  targets: ClusterRouteTargets,
): PodRouteText[] {
  const hops = routerIps.map((ip) => parseIp(ip));
  const own = podCidrs.map((c) => parseCidr(c));
  const out: PodRouteText[] = [];
  const seen = new Set<string>();
  for (const text of [targets.joinCIDR, ...targets.clusterCIDRs, ...targets.serviceCIDRs]) {
    const dest = parseCidr(text);
    const key = formatCidr(dest);
    if (seen.has(key)) continue;
    seen.add(key);
    const hop = hops.find((h) => h.family === dest.family);
    if (!hop || own.some((c) => c.family === dest.family && overlaps(c, dest))) continue;
    out.push({ dest: key, nextHop: routerIps[hops.indexOf(hop)] as string });
  }
  return out;
}

/** Whether `hop` is on one of the interface networks ("10.60.0.5/24"): on-link for a pod with those addresses. */
export function onLink(hop: IpAddress, networks: readonly string[]): boolean {
  return networks.some((n) => {
    const c = networkOf(n);
    return c.family === hop.family && cidrContains(c, hop);
  });
}
