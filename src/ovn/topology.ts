// The desired OVN logical topology in Standalone mode, as plain data:
//
//   pod ── subnet switch "subnet-<name>" ── rtos port ─┐
//                                                      ├─ cluster router "zovn-cluster-router"
//   node mgmt port ── join switch "zovn-join" ── rtoj ─┘      (+ one egress reroute policy per node)
//
// One logical switch per Subnet spans all nodes. Each node has a management port on the join switch; pod traffic
// leaving the cluster is rerouted by a router policy to the management port of the pod's own node, where the
// node agent SNATs it to the node IP (gateway.mode local).

import { createHash } from "node:crypto";
import { formatIp, ipFromValue, parseIp } from "../ipam/address.ts";
import { cidrLast, formatCidr, networkOf, parseCidr } from "../ipam/cidr.ts";
import { macFromIPv4 as macFromIPv4Address } from "../ipam/mac.ts";
import type { DesiredRow, Scope } from "./nb-diff.ts";
import {
  addressKey,
  JOIN_ADDRESS_SCOPE,
  KIND_KEY,
  NODE_KEY,
  ownedIds,
  SERVICE_SNAT_IP_KEY,
  SUBNET_KEY,
} from "./ownership.ts";

export const CLUSTER_ROUTER = "zovn-cluster-router";
export const JOIN_SWITCH = "zovn-join";
export const JOIN_ROUTER_PORT = "zovn-rtoj";
export const JOIN_SWITCH_PORT = "zovn-jtor";
/**
 * Priority of the ACL on the join switch that drops whatever a node's management port sends from a join
 * address not its own. The join switch holds no other ACL (pods' policy port groups never include a join port),
 * so it competes with none; it sits above every band of the NetworkPolicy plan (policy/acl-priority.ts).
 */
export const MGMT_SOURCE_GUARD_PRIORITY = 32_100;
/**
 * Priority of the ACL on a provider network switch that drops what enters through its localnet port with a
 * source inside the cluster (a node's management IP, an overlay pod's IP). NetworkPolicy and the own-node allow
 * identify peers by source address, and nothing on a VLAN stops a host from forging one; above every band of
 * the NetworkPolicy plan, so no allow outranks it.
 */
export const LOCALNET_SOURCE_GUARD_PRIORITY = 32_100;
/** Priority of the per-node egress reroute policies (above OVN's default allow, below anything an admin adds at 2000+). */
export const EGRESS_POLICY_PRIORITY = 1004;
/**
 * Priority of the per-node reply policies (see nodeReplyMatch): above the egress reroutes, which would send a
 * pod's reply to its own node, and above EXTERNAL_PODS_POLICY_PRIORITY (whose destinations, our pods' addresses,
 * are never a node's address: nothing overlaps); below anything an admin adds at 2000+.
 */
export const NODE_REPLY_POLICY_PRIORITY = 1006;
/**
 * The lowest of the source ports the node agent gives a node's own connections that reach a pod with the
 * node's own address as source (node-local NodePort traffic with externalTrafficPolicy Local). 61440-65535 is
 * one mask (0xf000) in OVN's flows and lies above Linux's default ephemeral ports (32768-60999).
 */
export const NODE_REPLY_PORT_MIN = 61_440;
export const NODE_REPLY_PORT_MAX = 65_535;
/**
 * The most addresses a node's reply policy holds: more than any node has. The controller takes the first of a
 * Node's InternalIPs in address order up to it; the agent ignores a longer list (never the whole annotation).
 */
export const NODE_REPLY_IPS_MAX = 16;

/**
 * What a node's reply policy matches: a packet to one of the node's own addresses whose destination port is in
 * the reserved range, i.e. a reply to a connection the node sent into OVN through its management port with its
 * own address as source. Only that node's conntrack can un-DNAT it, so it goes to that node's management port
 * wherever the pod is. Other traffic to a node address (a reply to a connection the node made to another node's
 * NodePort or hostPort, DNATed there without SNAT) keeps the egress path through the pod's own node.
 */
export function nodeReplyMatch(nodeIps: readonly string[]): string {
  const ports = (l4: string) => `(${l4} && ${l4}.dst >= ${NODE_REPLY_PORT_MIN})`;
  return `ip4.dst == {${nodeIps.join(", ")}} && (${["tcp", "udp", "sctp"].map(ports).join(" || ")})`;
}

export interface ClusterNetworks {
  /** Pod CIDRs of all subnets and the cluster CIDR: destinations that stay inside the cluster. */
  readonly clusterCIDRs: readonly string[];
  readonly serviceCIDRs: readonly string[];
  /** e.g. 100.64.0.0/16; its first address is the router's join port. */
  readonly joinCIDR: string;
  readonly joinGateway: string;
}

export interface SubnetTopology {
  readonly name: string;
  /** One or two CIDRs (IPv4 and/or IPv6). */
  readonly cidrs: readonly string[];
  /** The gateway address per CIDR, same order. */
  readonly gateways: readonly string[];
  /**
   * A provider network subnet: its switch gets a localnet port to this provider network (tagged with the VLAN
   * when given) instead of a port on the cluster router; the gateway is the underlay's router.
   */
  readonly provider?: { readonly name: string; readonly vlanID?: number | undefined } | undefined;
}

export interface NodeTopology {
  readonly name: string;
  /** Management port address on the join switch, with prefix, e.g. 100.64.0.2/16. */
  readonly mgmtIP: string;
  readonly mgmtMAC: string;
  /**
   * The node's service SNAT address on the join switch (no prefix): the source the node agent gives Service
   * connections that entered the node. Held by the management port too, so OVN routes replies to the node.
   */
  readonly serviceSnatIP?: string | undefined;
  /**
   * The node's own IPv4 addresses (its InternalIPs, validated: see controller/node-addresses.ts) whose replies
   * the cluster router returns to this node's management port (nodeReplyMatch). None: no reply policy.
   */
  readonly replyIPs?: readonly string[] | undefined;
}

export function subnetSwitchName(subnet: string): string {
  return `subnet-${subnet}`;
}
export function subnetRouterPortName(subnet: string): string {
  return `zovn-rtos-${subnet}`;
}
export function subnetSwitchPortName(subnet: string): string {
  return `zovn-stor-${subnet}`;
}
export function subnetLocalnetPortName(subnet: string): string {
  return `zovn-ln-${subnet}`;
}
export function mgmtPortName(node: string): string {
  return `zovn-mgmt-${node}`;
}

/** Address set names appear in ACL/policy matches as `$name`, so they must be identifiers; node names may not be. */
export function nodePodsAddressSet(node: string, family: 4 | 6): string {
  const safe = node.replace(/[^A-Za-z0-9]/g, "_").slice(0, 40);
  const h = createHash("sha256").update(node).digest("hex").slice(0, 8);
  return `zovn_pods_${safe}_${h}_v${family}`;
}

/** ovn-kubernetes style MAC derived from an IPv4 address: 0a:58 + the four address bytes. */
export function macFromIPv4(ip: string): string {
  return macFromIPv4Address(parseIp(ip));
}

/** The node annotation carrying the node's management port; written by the controller, read by the node agent. */
export const MGMT_PORT_ANNOTATION = "network.zstack.io/mgmt-port";

function prefixOf(cidr: string): string {
  return cidr.slice(cidr.indexOf("/") + 1);
}

function isV6(cidrOrIp: string): boolean {
  return cidrOrIp.includes(":");
}

function routerMac(gateways: readonly string[]): string {
  const v4 = gateways.find((g) => !isV6(g));
  if (v4) return macFromIPv4(v4);
  const h = createHash("sha256").update(gateways.join(",")).digest();
  return ["0a", "58", ...[...h.subarray(0, 4)].map((b) => b.toString(16).padStart(2, "0"))].join(":");
}

/**
 * The address the cluster router's default route points at: the last usable address of the join CIDR, which
 * the join IPAM never hands out. OVN routes before it applies router policies, so without any route a packet
 * bound outside the cluster is dropped; with this route it reaches the policy stage, where the egress policy
 * of the pod's node reroutes it. A packet that no policy matches goes to an address nobody answers.
 */
export function egressPlaceholder(joinCIDR: string): string {
  const cidr = parseCidr(joinCIDR);
  return formatIp(ipFromValue(cidr.family, cidrLast(cidr).value - 1n));
}

/** The address set of IPv4 destinations that stay inside the cluster; the egress policies match against it. */
export const INSIDE_ADDRESS_SET_V4 = "zovn_inside_v4";

/**
 * The cluster CIDR, the service and join CIDRs and every Subnet's CIDR: traffic to these stays on the cluster
 * router; everything else from a pod leaves through its node. One cluster-wide row, so a Subnet added or
 * removed changes one row, not every node's policy.
 */
export function insideSetRow(net: ClusterNetworks, subnetCidrs: readonly string[] = []): DesiredRow {
  const v4 = [...new Set([...net.clusterCIDRs, ...net.serviceCIDRs, net.joinCIDR, ...subnetCidrs])]
    .filter((c) => !isV6(c))
    .sort();
  return {
    table: "Address_Set",
    id: "inside-v4",
    row: { name: INSIDE_ADDRESS_SET_V4, addresses: v4, external_ids: ownedIds("inside-set", "inside-v4") },
  };
}

/** The addresses of our pods on ZStack's switches (External mode); the allow policy below matches on it. */
export const EXTERNAL_PODS_ADDRESS_SET_V4 = "zovn_external_pods_v4";
/** Above the egress reroute policies: traffic to a pod on ZStack's switch stays on the cluster router. */
export const EXTERNAL_PODS_POLICY_PRIORITY = 1005;

/**
 * External mode: the set of our pods' IPv4 addresses on ZStack's switches and the cluster router's policy that
 * lets traffic to them be routed (through our router port on their switch) instead of rerouted to a node as
 * egress. Their CIDRs are not in the inside set: a VM on the same network is outside the cluster, and a pod
 * reaches it through its node, SNATed, as before. The set's `addresses` is never written here, only created
 * empty: the pod writes change it by single-address mutations (pod-port-allocator.ts).
 */
export function externalPodsRows(): DesiredRow[] {
  return [
    {
      table: "Address_Set",
      id: "external-pods-v4",
      row: {
        name: EXTERNAL_PODS_ADDRESS_SET_V4,
        external_ids: ownedIds("external-pods-set", "external-pods-v4"),
      },
    },
    {
      table: "Logical_Router_Policy",
      id: "external-pods-v4",
      row: {
        priority: EXTERNAL_PODS_POLICY_PRIORITY,
        match: `ip4.dst == $${EXTERNAL_PODS_ADDRESS_SET_V4}`,
        action: "allow",
        external_ids: ownedIds("external-pods-policy", "external-pods-v4"),
      },
      parent: { table: "Logical_Router", id: "cluster-router", column: "policies" },
    },
  ];
}

/** The cluster router, the join switch and their link, and the inside address set (with `subnetCidrs`). */
export function coreRows(net: ClusterNetworks, subnetCidrs: readonly string[] = []): DesiredRow[] {
  const joinPrefix = prefixOf(net.joinCIDR);
  const v4Default = isV6(net.joinCIDR) ? "::/0" : "0.0.0.0/0";
  return [
    insideSetRow(net, subnetCidrs),
    {
      table: "Logical_Router",
      id: "cluster-router",
      row: { name: CLUSTER_ROUTER, external_ids: ownedIds("cluster-router", "cluster-router") },
    },
    {
      table: "Logical_Router_Static_Route",
      id: "egress-default",
      row: {
        ip_prefix: v4Default,
        nexthop: egressPlaceholder(net.joinCIDR),
        external_ids: ownedIds("egress-route", "egress-default"),
      },
      parent: { table: "Logical_Router", id: "cluster-router", column: "static_routes" },
    },
    {
      table: "Logical_Switch",
      id: "join",
      row: {
        name: JOIN_SWITCH,
        other_config: { subnet: net.joinCIDR },
        external_ids: ownedIds("join-switch", "join"),
      },
    },
    {
      table: "Logical_Router_Port",
      id: "join-rtoj",
      row: {
        name: JOIN_ROUTER_PORT,
        mac: macFromIPv4(net.joinGateway),
        networks: [`${net.joinGateway}/${joinPrefix}`],
        external_ids: ownedIds("router-port", "join-rtoj"),
      },
      parent: { table: "Logical_Router", id: "cluster-router", column: "ports" },
    },
    {
      table: "Logical_Switch_Port",
      id: "join-jtor",
      row: {
        name: JOIN_SWITCH_PORT,
        type: "router",
        addresses: ["router"],
        options: { "router-port": JOIN_ROUTER_PORT },
        external_ids: ownedIds("switch-router-port", "join-jtor"),
      },
      parent: { table: "Logical_Switch", id: "join", column: "ports" },
    },
  ];
}

/**
 * The Load_Balancer_Group holding every Service load balancer; each subnet switch we own refers to it, so a
 * Service is one row however many switches there are. The join switch does not: nodes reach Services through
 * their own nftables (the node agent). The table has no external_ids in NB schema 7.0.0: this name, unique in
 * the table, is our ownership, and only the controller's core step creates it.
 */
export const CLUSTER_LB_GROUP = "zovn-cluster-lbs";
/**
 * External mode: the Load_Balancer_Group a ZStack switch with our router port refers to. It holds only the load
 * balancers of cluster IPs inside the cluster's service CIDRs (service-lb.ts splits each Service's VIPs so), never
 * an externalIP or load-balancer IP: those are addresses a tenant chooses, and on ZStack's switch they would
 * capture the VMs' traffic to that address (a VM's neighbour, its DNS server). Every row in it is also in
 * CLUSTER_LB_GROUP. Ours by its name, as CLUSTER_LB_GROUP; only the controller's core step creates it.
 */
export const CLUSTER_IP_LB_GROUP = "zovn-cluster-ip-lbs";
/** The groups the controller owns by name (the table has no external_ids). */
export const OUR_LB_GROUPS: readonly string[] = [CLUSTER_LB_GROUP, CLUSTER_IP_LB_GROUP];

/**
 * A subnet's switch attached to the cluster router at the subnet gateway(s). With `lbGroup` (the UUID of
 * CLUSTER_LB_GROUP) the switch is made to refer to the group, also a switch made before the group existed.
 *
 * A provider network subnet is not attached to the cluster router: its gateway address belongs to the
 * underlay's router, which a router port of ours holding the same address would shadow on the VLAN. Its switch
 * gets a localnet port instead, and its pods' traffic leaves through each node's provider bridge, unSNATed.
 */
export function subnetRows(s: SubnetTopology, lbGroup?: string): DesiredRow[] {
  const ls = subnetSwitchName(s.name);
  const rtos = subnetRouterPortName(s.name);
  const tag = { [SUBNET_KEY]: s.name };
  const otherConfig: Record<string, string> = {};
  const v4 = s.cidrs.find((c) => !isV6(c));
  const v6 = s.cidrs.find((c) => isV6(c));
  if (v4) otherConfig.subnet = v4;
  if (v6) otherConfig.ipv6_prefix = v6.slice(0, v6.indexOf("/"));
  const sw: DesiredRow = {
    table: "Logical_Switch",
    id: `subnet/${s.name}`,
    row: {
      name: ls,
      other_config: otherConfig,
      external_ids: ownedIds("subnet-switch", `subnet/${s.name}`, tag),
    },
    ...(lbGroup ? { links: [{ column: "load_balancer_group", uuid: lbGroup }] } : {}),
  };
  if (s.provider) {
    return [
      sw,
      {
        table: "Logical_Switch_Port",
        id: `subnet/${s.name}/localnet`,
        row: {
          name: subnetLocalnetPortName(s.name),
          type: "localnet",
          // Frames from the physical network carry any MAC (the underlay router's, hosts'): all are let in.
          addresses: ["unknown"],
          options: { network_name: s.provider.name },
          // ovn-controller tags what leaves through the provider bridge with it, and takes only that VLAN in.
          tag: s.provider.vlanID === undefined ? [] : [s.provider.vlanID],
          external_ids: ownedIds("localnet-port", `subnet/${s.name}/localnet`, tag),
        },
        parent: { table: "Logical_Switch", id: `subnet/${s.name}`, column: "ports" },
      },
      {
        // Written and removed with the localnet port (one plan, one transaction). Provider CIDRs are never in
        // the inside set (the Subnet is refused when it overlaps the cluster's ranges), so the VLAN's own hosts
        // and router pass; a frame claiming a cluster address can only be forged.
        table: "ACL",
        id: `subnet/${s.name}/localnet-guard`,
        row: {
          direction: "from-lport",
          priority: LOCALNET_SOURCE_GUARD_PRIORITY,
          action: "drop",
          match: `inport == "${subnetLocalnetPortName(s.name)}" && ip4 && ip4.src == $${INSIDE_ADDRESS_SET_V4}`,
          external_ids: ownedIds("localnet-source-guard", `subnet/${s.name}/localnet-guard`, tag),
        },
        parent: { table: "Logical_Switch", id: `subnet/${s.name}`, column: "acls" },
      },
    ];
  }
  return [
    sw,
    {
      table: "Logical_Router_Port",
      id: `subnet/${s.name}/rtos`,
      row: {
        name: rtos,
        mac: routerMac(s.gateways),
        networks: s.gateways.map((g, i) => `${g}/${prefixOf(s.cidrs[i] as string)}`),
        external_ids: ownedIds("router-port", `subnet/${s.name}/rtos`, tag),
      },
      parent: { table: "Logical_Router", id: "cluster-router", column: "ports" },
    },
    {
      table: "Logical_Switch_Port",
      id: `subnet/${s.name}/stor`,
      row: {
        name: subnetSwitchPortName(s.name),
        type: "router",
        addresses: ["router"],
        options: { "router-port": rtos },
        external_ids: ownedIds("switch-router-port", `subnet/${s.name}/stor`, tag),
      },
      parent: { table: "Logical_Switch", id: `subnet/${s.name}`, column: "ports" },
    },
  ];
}

/**
 * A node's management port on the join switch, the address sets of the pods on that node, and the router
 * policy that sends their traffic bound outside the cluster to this node's management port.
 * The address set's `addresses` column is written only with `podAddresses`, when the set is created: after
 * that, pod writes and the node reconcile change it by single-address mutations, which never undo each other.
 */
export function nodeRows(n: NodeTopology, podAddresses?: readonly string[]): DesiredRow[] {
  const tag = { [NODE_KEY]: n.name };
  const mgmtIp = n.mgmtIP.slice(0, n.mgmtIP.indexOf("/"));
  const rows: DesiredRow[] = [
    {
      table: "Logical_Switch_Port",
      id: `node/${n.name}/mgmt`,
      row: {
        name: mgmtPortName(n.name),
        addresses: [`${n.mgmtMAC} ${mgmtIp}${n.serviceSnatIP ? ` ${n.serviceSnatIP}` : ""}`],
        options: { "requested-chassis": n.name },
        // One key per address: an insert of a fresh address waits until no join port has its key.
        external_ids: ownedIds("mgmt-port", `node/${n.name}/mgmt`, {
          ...tag,
          ...(n.serviceSnatIP ? { [SERVICE_SNAT_IP_KEY]: n.serviceSnatIP } : {}),
          [addressKey(mgmtIp)]: JOIN_ADDRESS_SCOPE,
          ...(n.serviceSnatIP ? { [addressKey(n.serviceSnatIP)]: JOIN_ADDRESS_SCOPE } : {}),
        }),
      },
      parent: { table: "Logical_Switch", id: "join", column: "ports" },
    },
  ];
  // A node may source into OVN only the join addresses it was given: another node's management address is that
  // node's own-node allow in NetworkPolicy, its service SNAT address that node's replies. (port_security cannot
  // say it: it would also limit what OVN delivers to the port, and pods' egress and ETP Local replies go to the
  // management port with outside destinations; ETP Local brings outside sources in through it too.)
  const own = [mgmtIp, ...(n.serviceSnatIP ? [n.serviceSnatIP] : [])].join(", ");
  const join = formatCidr(networkOf(n.mgmtIP));
  rows.push({
    table: "ACL",
    id: `node/${n.name}/source-guard`,
    row: {
      direction: "from-lport",
      priority: MGMT_SOURCE_GUARD_PRIORITY,
      action: "drop",
      match:
        `inport == "${mgmtPortName(n.name)}" && ((ip4 && ip4.src == ${join} && ip4.src != {${own}}) || ` +
        `(arp && arp.spa == ${join} && arp.spa != {${own}}))`,
      external_ids: ownedIds("mgmt-source-guard", `node/${n.name}/source-guard`, tag),
    },
    parent: { table: "Logical_Switch", id: "join", column: "acls" },
  });
  const set = nodePodsAddressSet(n.name, 4);
  rows.push(
    {
      table: "Address_Set",
      id: `node/${n.name}/pods-v4`,
      row: {
        name: set,
        ...(podAddresses ? { addresses: [...podAddresses] } : {}),
        external_ids: ownedIds("node-pods", `node/${n.name}/pods-v4`, tag),
      },
    },
    {
      table: "Logical_Router_Policy",
      id: `node/${n.name}/egress-v4`,
      row: {
        priority: EGRESS_POLICY_PRIORITY,
        match: `ip4.src == $${set} && ip4.dst != $${INSIDE_ADDRESS_SET_V4}`,
        action: "reroute",
        nexthops: [mgmtIp],
        external_ids: ownedIds("egress-policy", `node/${n.name}/egress-v4`, tag),
      },
      parent: { table: "Logical_Router", id: "cluster-router", column: "policies" },
    },
  );
  const replyIPs = [...new Set(n.replyIPs ?? [])].sort();
  if (replyIPs.length > 0)
    rows.push({
      table: "Logical_Router_Policy",
      id: `node/${n.name}/node-reply-v4`,
      row: {
        priority: NODE_REPLY_POLICY_PRIORITY,
        match: nodeReplyMatch(replyIPs),
        action: "reroute",
        nexthops: [mgmtIp],
        external_ids: ownedIds("node-reply-policy", `node/${n.name}/node-reply-v4`, tag),
      },
      parent: { table: "Logical_Router", id: "cluster-router", column: "policies" },
    });
  return rows;
}

const TOPOLOGY_KINDS = new Set([
  "cluster-router",
  "join-switch",
  "subnet-switch",
  "router-port",
  "switch-router-port",
  "localnet-port",
  "localnet-source-guard",
  "external-source-guard",
  "mgmt-port",
  "mgmt-source-guard",
  "node-pods",
  "egress-policy",
  "node-reply-policy",
  "egress-route",
  "inside-set",
]);

/** The owned rows a full topology plan is responsible for: everything but pod ports. */
export const topologyScope: Scope = {
  tables: [
    "Logical_Router_Static_Route",
    "Logical_Router_Policy",
    "Logical_Router_Port",
    "Logical_Switch_Port",
    "Address_Set",
    "ACL",
    "Logical_Switch",
    "Logical_Router",
  ],
  owns: (_id, row) => TOPOLOGY_KINDS.has((row.external_ids as Record<string, string>)[KIND_KEY] ?? ""),
};

/** The rows one subnet's reconcile is responsible for: its switch and router ports, never its pods' ports. */
export function subnetScope(name: string): Scope {
  return {
    tables: [
      "Logical_Router_Policy",
      "Logical_Router_Port",
      "Logical_Switch_Port",
      "ACL",
      "Port_Group",
      "Logical_Switch",
    ],
    owns: (id, row) =>
      (id === `subnet/${name}` || id.startsWith(`subnet/${name}/`)) &&
      (row.external_ids as Record<string, string>)[KIND_KEY] !== "pod-port",
    groups: [`subnet/${name}`],
  };
}

/** The rows one node's reconcile is responsible for: its management port, address set, egress and reply policies. */
export function nodeScope(node: string): Scope {
  return {
    tables: ["Logical_Router_Policy", "Logical_Switch_Port", "Address_Set", "ACL"],
    owns: (id) => id.startsWith(`node/${node}/`),
    groups: [`node/${node}`],
  };
}

/** The whole desired topology, parents before children. */
export function desiredTopology(
  net: ClusterNetworks,
  subnets: readonly SubnetTopology[],
  nodes: readonly NodeTopology[],
): DesiredRow[] {
  return [
    ...coreRows(
      net,
      subnets.filter((s) => !s.provider).flatMap((s) => s.cidrs),
    ),
    ...subnets.flatMap((s) => subnetRows(s)),
    ...nodes.flatMap((n) => nodeRows(n)),
  ];
}
